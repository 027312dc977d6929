#ifndef TOKENCACHE_CLIBSECRET_SHIM_H
#define TOKENCACHE_CLIBSECRET_SHIM_H
// GLib and GIO are linked. libsecret is not: it is loaded at run time with dlopen (see
// LibSecret.swift), so a program using the package starts on machines without it and can fall
// back to the encrypted file. Reads and writes are plain D-Bus calls (SecretServiceBackend);
// libsecret is used for what needs its prompt handling. Building needs only GLib's headers: the part of libsecret's ABI
// the backend uses is declared here, copied from libsecret 0.20.5's headers
// (/usr/include/libsecret-1/libsecret/secret-{service,collection}.h).
#include <dlfcn.h>
#include <gio/gio.h>

// scripts/check-libsecret-abi.sh compiles this header after libsecret's own, with the types
// below left out, to check every function signature and layout against the real headers.
#ifndef TC_CHECK_AGAINST_LIBSECRET_HEADERS
// secret-service.h, secret-collection.h: GDBusProxy subclasses (instance layout as in libsecret).
typedef struct _SecretService { GDBusProxy parent; gpointer pv; } SecretService;
typedef struct _SecretCollection { GDBusProxy parent; gpointer pv; } SecretCollection;

typedef enum {
    SECRET_SERVICE_NONE = 0,
    SECRET_SERVICE_OPEN_SESSION = 1 << 1,
    SECRET_SERVICE_LOAD_COLLECTIONS = 1 << 2,
} SecretServiceFlags;

typedef enum {
    SECRET_COLLECTION_NONE = 0,
    SECRET_COLLECTION_LOAD_ITEMS = 1 << 1,
} SecretCollectionFlags;

typedef enum {
    SECRET_COLLECTION_CREATE_NONE = 0,
} SecretCollectionCreateFlags;

#endif

/// The libsecret functions the backend calls, resolved with dlsym. Each field has the name and
/// the exact signature of the libsecret function.
typedef struct {
    GType (*secret_service_get_type)(void);
    SecretService *(*secret_service_open_sync)(GType service_gtype, const gchar *service_bus_name,
                                               SecretServiceFlags flags, GCancellable *cancellable, GError **error);
    gint (*secret_service_unlock_dbus_paths_sync)(SecretService *self, const gchar **paths, GCancellable *cancellable,
                                                  gchar ***unlocked, GError **error);

    SecretCollection *(*secret_collection_create_sync)(SecretService *service, const gchar *label, const gchar *alias,
                                                       SecretCollectionCreateFlags flags, GCancellable *cancellable,
                                                       GError **error);
} TCLibSecretFunctions;

/// Resolves every field of `functions` from a dlopen handle. Returns NULL when all were found,
/// else the name of the first missing function (`functions` is then incomplete: do not use it).
static inline const char *tc_libsecret_resolve(void *handle, TCLibSecretFunctions *functions) {
#define TC_RESOLVE(name) \
    if ((functions->name = (__typeof__(functions->name))dlsym(handle, #name)) == NULL) return #name
    TC_RESOLVE(secret_service_get_type);
    TC_RESOLVE(secret_service_open_sync);
    TC_RESOLVE(secret_service_unlock_dbus_paths_sync);
    TC_RESOLVE(secret_collection_create_sync);
#undef TC_RESOLVE
    return NULL;
}

#endif
