#ifndef TOKENCACHE_CMALLOC_SHIM_H
#define TOKENCACHE_CMALLOC_SHIM_H
// glibc's mallopt, which the Glibc module does not export: for the `tokencache` executable only.
#include <malloc.h>
#endif
