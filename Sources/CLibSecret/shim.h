#ifndef TOKENCACHE_CLIBSECRET_SHIM_H
#define TOKENCACHE_CLIBSECRET_SHIM_H
// Bulk path search and GetSecrets are "unstable" API in libsecret 0.20, but they are the
// 20x faster way to read many items (see DESIGN.md section 5).
#define SECRET_WITH_UNSTABLE 1
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
#endif
