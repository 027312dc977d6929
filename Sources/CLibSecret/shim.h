#ifndef TOKENCACHE_CLIBSECRET_SHIM_H
#define TOKENCACHE_CLIBSECRET_SHIM_H
// GLib and GIO, which are linked: the Secret Service client makes plain GDBus calls
// (SecretServiceClient), prompts included. libsecret is neither linked nor loaded; libgcrypt,
// for the encrypted transfer, is loaded at run time (CGcrypt/transfer.h).
#include <gio/gio.h>

#endif
