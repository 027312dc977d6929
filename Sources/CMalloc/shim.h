#ifndef TOKENCACHE_CMALLOC_SHIM_H
#define TOKENCACHE_CMALLOC_SHIM_H
// glibc's malloc tuning (mallopt), which the Glibc module does not export: the tokencache
// executable sets it once at start-up (see TokenCacheMain.swift).
#include <malloc.h>
#endif
