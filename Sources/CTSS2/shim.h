#ifndef TOKENCACHE_CTSS2_SHIM_H
#define TOKENCACHE_CTSS2_SHIM_H
// tpm2-tss (libtss2-esys with its libtss2-mu, and libtss2-tctildr) is not linked: it is loaded
// at run time with dlopen when the TPM key source is first used (see TPM.swift), so no other
// process maps it and building needs no tpm2-tss headers. The TPM structures stay incomplete
// here: Swift builds and reads them only in the TPM's own wire format, through libtss2-mu's
// (un)marshalling, so no layout is copied except the few sizes and offsets below.
// scripts/check-tss2-abi.sh checks these declarations against the real headers (libtss2-dev).
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

typedef uint32_t TSS2_RC;
typedef uint32_t ESYS_TR;
typedef struct ESYS_CONTEXT ESYS_CONTEXT;
typedef struct TSS2_TCTI_OPAQUE_CONTEXT_BLOB TSS2_TCTI_CONTEXT;
typedef struct TSS2_ABI_VERSION TSS2_ABI_VERSION;
typedef struct TPM2B_PUBLIC TPM2B_PUBLIC;
typedef struct TPM2B_PRIVATE TPM2B_PRIVATE;
typedef struct TPM2B_SENSITIVE_CREATE TPM2B_SENSITIVE_CREATE;
typedef struct TPM2B_SENSITIVE_DATA TPM2B_SENSITIVE_DATA;
typedef struct TPM2B_DATA TPM2B_DATA;
typedef struct TPM2B_DIGEST TPM2B_DIGEST;
typedef struct TPM2B_CREATION_DATA TPM2B_CREATION_DATA;
typedef struct TPMT_TK_CREATION TPMT_TK_CREATION;
typedef struct TPML_PCR_SELECTION TPML_PCR_SELECTION;
typedef struct TPMS_CAPABILITY_DATA TPMS_CAPABILITY_DATA;

enum {
    // ESYS_TR handles of tss2_esys.h.
    TC_ESYS_TR_NONE = 0xfff,
    TC_ESYS_TR_PASSWORD = 0x0ff,
    TC_ESYS_TR_RH_OWNER = 0x101,
    // sizeof of the structures Swift allocates and fills with an _Unmarshal call.
    TC_SIZEOF_TPM2B_PUBLIC = 616,
    TC_SIZEOF_TPM2B_PRIVATE = 1552,
    TC_SIZEOF_TPM2B_SENSITIVE_CREATE = 326,
    // Where an unsealed secret's bytes start in TPM2B_SENSITIVE_DATA (after its UINT16 size), and
    // how many it holds at most: read and wiped in place, never marshalled into another copy.
    TC_TPM2B_SENSITIVE_DATA_BUFFER_OFFSET = 2,
    TC_TPM2_MAX_SYM_DATA = 256,
    // Response codes the key source tells apart, and the layer of the TCTI's own errors.
    TC_TPM2_RC_FMT1 = 0x080,
    TC_TPM2_RC_INTEGRITY = 0x09F,
    TC_TPM2_RC_BAD_AUTH = 0x0A2,
    TC_TPM2_RC_AUTH_FAIL = 0x08E,
    TC_TPM2_RC_OBJECT_MEMORY = 0x902,
    TC_TPM2_RC_MEMORY = 0x904,
    TC_TPM2_RC_YIELDED = 0x908,
    TC_TPM2_RC_TESTING = 0x90A,
    TC_TPM2_RC_NV_RATE = 0x920,
    TC_TPM2_RC_LOCKOUT = 0x921,
    TC_TPM2_RC_RETRY = 0x922,
    TC_TSS2_RC_LAYER_MASK = 0xff0000,
    TC_TSS2_TCTI_RC_LAYER = 0x0a0000,
    TC_TSS2_RESMGR_TPM_RC_LAYER = 0x0c0000,
    // GetCapability of the manufacturer, for `tokencache doctor`.
    TC_TPM2_CAP_TPM_PROPERTIES = 6,
    TC_TPM2_PT_MANUFACTURER = 0x105,
};

/// The libtss2-esys (and libtss2-mu, which it loads) functions the TPM key source calls.
typedef struct {
    TSS2_RC (*Esys_Initialize)(ESYS_CONTEXT **esys_context, TSS2_TCTI_CONTEXT *tcti, TSS2_ABI_VERSION *abiVersion);
    void (*Esys_Finalize)(ESYS_CONTEXT **context);
    void (*Esys_Free)(void *__ptr);
    TSS2_RC (*Esys_CreatePrimary)(ESYS_CONTEXT *esysContext, ESYS_TR primaryHandle, ESYS_TR shandle1, ESYS_TR shandle2,
                                  ESYS_TR shandle3, const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic,
                                  const TPM2B_DATA *outsideInfo, const TPML_PCR_SELECTION *creationPCR, ESYS_TR *objectHandle,
                                  TPM2B_PUBLIC **outPublic, TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash,
                                  TPMT_TK_CREATION **creationTicket);
    TSS2_RC (*Esys_Create)(ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2,
                           ESYS_TR shandle3, const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic,
                           const TPM2B_DATA *outsideInfo, const TPML_PCR_SELECTION *creationPCR, TPM2B_PRIVATE **outPrivate,
                           TPM2B_PUBLIC **outPublic, TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash,
                           TPMT_TK_CREATION **creationTicket);
    TSS2_RC (*Esys_Load)(ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2,
                         ESYS_TR shandle3, const TPM2B_PRIVATE *inPrivate, const TPM2B_PUBLIC *inPublic, ESYS_TR *objectHandle);
    TSS2_RC (*Esys_Unseal)(ESYS_CONTEXT *esysContext, ESYS_TR itemHandle, ESYS_TR shandle1, ESYS_TR shandle2,
                           ESYS_TR shandle3, TPM2B_SENSITIVE_DATA **outData);
    TSS2_RC (*Esys_FlushContext)(ESYS_CONTEXT *esysContext, ESYS_TR flushHandle);
    TSS2_RC (*Esys_GetCapability)(ESYS_CONTEXT *esysContext, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3,
                                  uint32_t capability, uint32_t property, uint32_t propertyCount, uint8_t *moreData,
                                  TPMS_CAPABILITY_DATA **capabilityData);
    TSS2_RC (*Tss2_MU_TPM2B_PUBLIC_Marshal)(TPM2B_PUBLIC const *src, uint8_t buffer[], size_t buffer_size, size_t *offset);
    TSS2_RC (*Tss2_MU_TPM2B_PUBLIC_Unmarshal)(uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PUBLIC *dest);
    TSS2_RC (*Tss2_MU_TPM2B_PRIVATE_Marshal)(TPM2B_PRIVATE const *src, uint8_t buffer[], size_t buffer_size, size_t *offset);
    TSS2_RC (*Tss2_MU_TPM2B_PRIVATE_Unmarshal)(uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PRIVATE *dest);
    TSS2_RC (*Tss2_MU_TPM2B_SENSITIVE_CREATE_Unmarshal)(uint8_t const buffer[], size_t buffer_size, size_t *offset,
                                                       TPM2B_SENSITIVE_CREATE *dest);
    TSS2_RC (*Tss2_MU_TPMS_CAPABILITY_DATA_Marshal)(TPMS_CAPABILITY_DATA const *src, uint8_t buffer[], size_t buffer_size,
                                                   size_t *offset);
} TCEsysFunctions;

/// The libtss2-tctildr functions: a TCTI ("device:/dev/tpmrm0", "swtpm:host=…,port=…") by its name.
typedef struct {
    TSS2_RC (*Tss2_TctiLdr_Initialize)(const char *nameConf, TSS2_TCTI_CONTEXT **context);
    void (*Tss2_TctiLdr_Finalize)(TSS2_TCTI_CONTEXT **context);
} TCTctiLdrFunctions;

#define TC_RESOLVE(name) \
    if (!(*(void **)&functions->name = dlsym(library, #name))) return #name;

/// Resolves every function; returns the name of the first one missing, or NULL.
static inline const char *tc_esys_resolve(void *library, TCEsysFunctions *functions) {
    TC_RESOLVE(Esys_Initialize)
    TC_RESOLVE(Esys_Finalize)
    TC_RESOLVE(Esys_Free)
    TC_RESOLVE(Esys_CreatePrimary)
    TC_RESOLVE(Esys_Create)
    TC_RESOLVE(Esys_Load)
    TC_RESOLVE(Esys_Unseal)
    TC_RESOLVE(Esys_FlushContext)
    TC_RESOLVE(Esys_GetCapability)
    TC_RESOLVE(Tss2_MU_TPM2B_PUBLIC_Marshal)
    TC_RESOLVE(Tss2_MU_TPM2B_PUBLIC_Unmarshal)
    TC_RESOLVE(Tss2_MU_TPM2B_PRIVATE_Marshal)
    TC_RESOLVE(Tss2_MU_TPM2B_PRIVATE_Unmarshal)
    TC_RESOLVE(Tss2_MU_TPM2B_SENSITIVE_CREATE_Unmarshal)
    TC_RESOLVE(Tss2_MU_TPMS_CAPABILITY_DATA_Marshal)
    return NULL;
}

/// Resolves every function; returns the name of the first one missing, or NULL.
static inline const char *tc_tctildr_resolve(void *library, TCTctiLdrFunctions *functions) {
    TC_RESOLVE(Tss2_TctiLdr_Initialize)
    TC_RESOLVE(Tss2_TctiLdr_Finalize)
    return NULL;
}

#undef TC_RESOLVE

#endif
