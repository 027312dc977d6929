#ifndef TOKENCACHE_CLIBSECRET_SHIM_H
#define TOKENCACHE_CLIBSECRET_SHIM_H
// GLib and GIO are linked. libsecret is not: it is loaded at run time with dlopen (see
// LibSecret.swift), so a program using the package starts on machines without it and can fall
// back to the encrypted file. Building needs only GLib's headers: the part of libsecret's ABI
// the backend uses is declared here, copied from libsecret 0.20.5's headers
// (/usr/include/libsecret-1/libsecret/secret-{service,collection,schema,value}.h).
#include <dlfcn.h>
#include <gio/gio.h>

// scripts/check-libsecret-abi.sh compiles this header after libsecret's own, with the types
// below left out, to check every function signature and layout against the real headers.
#ifndef TC_CHECK_AGAINST_LIBSECRET_HEADERS
// secret-service.h, secret-collection.h: GDBusProxy subclasses (instance layout as in libsecret).
typedef struct _SecretService { GDBusProxy parent; gpointer pv; } SecretService;
typedef struct _SecretCollection { GDBusProxy parent; gpointer pv; } SecretCollection;
// secret-value.h: an opaque boxed type.
typedef struct _SecretValue SecretValue;

// secret-schema.h
typedef enum {
    SECRET_SCHEMA_ATTRIBUTE_STRING = 0,
    SECRET_SCHEMA_ATTRIBUTE_INTEGER = 1,
    SECRET_SCHEMA_ATTRIBUTE_BOOLEAN = 2,
} SecretSchemaAttributeType;

typedef struct {
    const gchar *name;
    SecretSchemaAttributeType type;
} SecretSchemaAttribute;

typedef enum {
    SECRET_SCHEMA_NONE = 0,
    SECRET_SCHEMA_DONT_MATCH_NAME = 1 << 1,
} SecretSchemaFlags;

typedef struct {
    const gchar *name;
    SecretSchemaFlags flags;
    SecretSchemaAttribute attributes[32];
    gint reserved;
    gpointer reserved1, reserved2, reserved3, reserved4, reserved5, reserved6, reserved7;
} SecretSchema;

// secret-service.h, secret-collection.h
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
    gboolean (*secret_service_store_sync)(SecretService *service, const SecretSchema *schema, GHashTable *attributes,
                                          const gchar *collection, const gchar *label, SecretValue *value,
                                          GCancellable *cancellable, GError **error);
    gboolean (*secret_service_delete_item_dbus_path_sync)(SecretService *self, const gchar *item_path,
                                                          GCancellable *cancellable, GError **error);
    gboolean (*secret_service_search_for_dbus_paths_sync)(SecretService *self, const SecretSchema *schema,
                                                          GHashTable *attributes, GCancellable *cancellable,
                                                          gchar ***unlocked, gchar ***locked, GError **error);
    void (*secret_service_get_secrets_for_dbus_paths)(SecretService *self, const gchar **item_paths,
                                                      GCancellable *cancellable, GAsyncReadyCallback callback,
                                                      gpointer user_data);
    GHashTable *(*secret_service_get_secrets_for_dbus_paths_finish)(SecretService *self, GAsyncResult *result,
                                                                    GError **error);
    gboolean (*secret_service_ensure_session_sync)(SecretService *self, GCancellable *cancellable, GError **error);
    gchar *(*secret_service_read_alias_dbus_path_sync)(SecretService *self, const gchar *alias,
                                                       GCancellable *cancellable, GError **error);
    gint (*secret_service_unlock_dbus_paths_sync)(SecretService *self, const gchar **paths, GCancellable *cancellable,
                                                  gchar ***unlocked, GError **error);

    SecretCollection *(*secret_collection_create_sync)(SecretService *service, const gchar *label, const gchar *alias,
                                                       SecretCollectionCreateFlags flags, GCancellable *cancellable,
                                                       GError **error);

    SecretSchema *(*secret_schema_newv)(const gchar *name, SecretSchemaFlags flags, GHashTable *attribute_names_and_types);
    void (*secret_schema_unref)(SecretSchema *schema);

    SecretValue *(*secret_value_new)(const gchar *secret, gssize length, const gchar *content_type);
    const gchar *(*secret_value_get)(SecretValue *value, gsize *length);
    void (*secret_value_unref)(gpointer value);

    /// Optional (NULL when absent): libsecret's own decoder of a GetSecrets reply, exported by
    /// every release since 0.8 but private. See tc_get_secrets_for_dbus_paths.
    GHashTable *(*_secret_service_decode_get_secrets_all)(SecretService *self, GVariant *reply);
} TCLibSecretFunctions;

/// Resolves every field of `functions` from a dlopen handle. Returns NULL when all were found,
/// else the name of the first missing function (`functions` is then incomplete: do not use it).
static inline const char *tc_libsecret_resolve(void *handle, TCLibSecretFunctions *functions) {
#define TC_RESOLVE(name) \
    if ((functions->name = (__typeof__(functions->name))dlsym(handle, #name)) == NULL) return #name
    TC_RESOLVE(secret_service_get_type);
    TC_RESOLVE(secret_service_open_sync);
    TC_RESOLVE(secret_service_store_sync);
    TC_RESOLVE(secret_service_delete_item_dbus_path_sync);
    TC_RESOLVE(secret_service_search_for_dbus_paths_sync);
    TC_RESOLVE(secret_service_get_secrets_for_dbus_paths);
    TC_RESOLVE(secret_service_get_secrets_for_dbus_paths_finish);
    TC_RESOLVE(secret_service_ensure_session_sync);
    TC_RESOLVE(secret_service_read_alias_dbus_path_sync);
    TC_RESOLVE(secret_service_unlock_dbus_paths_sync);
    TC_RESOLVE(secret_collection_create_sync);
    TC_RESOLVE(secret_schema_newv);
    TC_RESOLVE(secret_schema_unref);
    TC_RESOLVE(secret_value_new);
    TC_RESOLVE(secret_value_get);
    TC_RESOLVE(secret_value_unref);
#undef TC_RESOLVE
    functions->_secret_service_decode_get_secrets_all =
        (__typeof__(functions->_secret_service_decode_get_secrets_all))dlsym(handle, "_secret_service_decode_get_secrets_all");
    return NULL;
}

typedef struct { GMainLoop *loop; GAsyncResult *result; } TCPendingCall;

static void tc_pending_call_done(GObject *source, GAsyncResult *result, gpointer data) {
    (void)source;
    TCPendingCall *call = (TCPendingCall *)data;
    call->result = (GAsyncResult *)g_object_ref(result);
    g_main_loop_quit(call->loop);
}

/// What secret_service_get_secrets_for_dbus_paths_sync does (one GetSecrets call for every path,
/// on a private main context), without its leak: libsecret 0.20.5's _finish never releases the
/// D-Bus reply, so every bulk read leaked all the (session-encrypted) secrets it read, about
/// 2.5 MB per read of 1,000 items. Where the reply is a GTask's result (0.20.5 and later) and
/// the decoder is exported, the reply is taken here, decoded by libsecret and released;
/// otherwise _finish is used as it is.
static inline GHashTable *tc_get_secrets_for_dbus_paths(const TCLibSecretFunctions *functions, SecretService *service,
                                                       const gchar **paths, GCancellable *cancellable,
                                                       GError **error) {
    GMainContext *context = g_main_context_new();
    TCPendingCall call = { g_main_loop_new(context, FALSE), NULL };
    g_main_context_push_thread_default(context);
    functions->secret_service_get_secrets_for_dbus_paths(service, paths, cancellable, tc_pending_call_done, &call);
    g_main_loop_run(call.loop);
    GHashTable *secrets = NULL;
    if (functions->_secret_service_decode_get_secrets_all != NULL && G_IS_TASK(call.result)) {
        GVariant *reply = (GVariant *)g_task_propagate_pointer(G_TASK(call.result), error);
        if (reply != NULL) {
            secrets = functions->_secret_service_decode_get_secrets_all(service, reply);
            g_variant_unref(reply);
        } else if (error != NULL && *error != NULL) {
            g_dbus_error_strip_remote_error(*error);
        }
    } else {
        secrets = functions->secret_service_get_secrets_for_dbus_paths_finish(service, call.result, error);
    }
    g_object_unref(call.result);
    while (g_main_context_iteration(context, FALSE)) {}  // whatever the call left queued
    g_main_context_pop_thread_default(context);
    g_main_loop_unref(call.loop);
    g_main_context_unref(context);
    return secrets;
}
#endif
