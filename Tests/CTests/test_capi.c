/*
 * Tests of the C interface against the built or installed libtokencache and a real keyring
 * (run inside scripts/with-test-keyring.sh; scripts/test-c-api.sh builds and runs them).
 *   test_capi                       every test below
 *   test_capi save GROUP TAG        saves a response for carol (access token "at-capi-TAG")
 *   test_capi find GROUP CLIENT ACCOUNT SCOPES   prints the cached access token; exit 3 if none
 *   test_capi device-code GROUP CLIENT PORT ANSWER   signs carol in with a device code at the local
 *                                   identity provider on 127.0.0.1:PORT (fake_idp.py), whose
 *                                   on_code callback answers with ANSWER (approve_device or
 *                                   deny_device); prints the token, else the status name (exit 1)
 *   test_capi refresh GROUP CLIENT PORT ACCOUNT COUNT   on one store handle, COUNT forced silent
 *                                   refreshes at the identity provider on 127.0.0.1:PORT; prints
 *                                   each token (the caller counts the provider's requests)
 * Built with -DTOKENCACHE_TEST_WIPE it also interposes free() to see tokencache_secret_free's
 * buffer at the moment it is freed (not with AddressSanitizer, which owns free()).
 */
#define _GNU_SOURCE
#include <tokencache.h>

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define GROUP "org.example.capitest"
#define CLIENT_A "aaaaaaaa-0000-0000-0000-00000000c0a1"
#define CLIENT_B "aaaaaaaa-0000-0000-0000-00000000c0b2"
#define AUTHORITY "https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111"
#define HOME_ID "c0ffee00-0000-0000-0000-000000000001.11111111-1111-1111-1111-111111111111"
#define USERNAME "carol@contoso.com"
#define CLIENT_INFO "eyJ1aWQiOiJjMGZmZWUwMC0wMDAwLTAwMDAtMDAwMC0wMDAwMDAwMDAwMDEiLCJ1dGlkIjoiMTExMTExMTEtMTExMS0xMTExLTExMTEtMTExMTExMTExMTExIn0"
#define ID_TOKEN "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJhdWQiOiJ4IiwiaXNzIjoiaHR0cHM6Ly9sb2dpbi5taWNyb3NvZnRvbmxpbmUuY29tLzExMTExMTExLTExMTEtMTExMS0xMTExLTExMTExMTExMTExMS92Mi4wIiwic3ViIjoic3ViLWMwZmZlZSIsIm9pZCI6ImMwZmZlZTAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMSIsInRpZCI6IjExMTExMTExLTExMTEtMTExMS0xMTExLTExMTExMTExMTExMSIsInByZWZlcnJlZF91c2VybmFtZSI6ImNhcm9sQGNvbnRvc28uY29tIiwibmFtZSI6IkNhcm9sIEV4YW1wbGUifQ.c2lnbmF0dXJl"

static int failures;
#define CHECK(condition, ...) do { \
    if (!(condition)) { failures++; fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #condition); \
                        fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

#ifdef TOKENCACHE_TEST_WIPE
/* Every free() of the process comes here first: for the watched buffer, record whether all of
   its bytes were zero when it was handed back to the allocator. */
void __libc_free(void *pointer);
static const void *watched;
static size_t watched_length;
static int watched_freed, watched_zeroed;
void free(void *pointer) {
    if (pointer != NULL && pointer == watched) {
        watched_freed = 1;
        watched_zeroed = 1;
        for (size_t i = 0; i < watched_length; i++) {
            if (((const volatile char *)pointer)[i] != 0) watched_zeroed = 0;
        }
        watched = NULL;
    }
    __libc_free(pointer);
}
#endif

static char *response(const char *tag) {
    static char json[4096];
    snprintf(json, sizeof json,
             "{\"token_type\":\"Bearer\",\"expires_in\":3600,\"ext_expires_in\":7200,"
             "\"scope\":\"User.Read Mail.Read\",\"access_token\":\"at-capi-%s\",\"refresh_token\":\"rt-capi-%s\","
             "\"foci\":\"1\",\"client_info\":\"%s\",\"id_token\":\"%s\"}", tag, tag, CLIENT_INFO, ID_TOKEN);
    return json;
}

static tokencache_store *open_store(const char *group) {
    tokencache_store *store = NULL;
    tokencache_error error = {0};
    int status = tokencache_store_open(group, TOKENCACHE_BACKEND_SECRET_SERVICE, &store, &error);
    if (status != TOKENCACHE_OK) {
        fprintf(stderr, "tokencache_store_open: %s: %s (%s)\n", tokencache_status_name(status), error.message, error.hint);
        exit(2);
    }
    return store;
}

static int save(tokencache_store *store, const char *client, const char *tag) {
    tokencache_error error = {0};
    char *json = response(tag);
    int status = tokencache_store_save_response(store, client, AUTHORITY, "User.Read", json, strlen(json), NULL, &error);
    if (status != TOKENCACHE_OK) fprintf(stderr, "save: %s: %s\n", tokencache_status_name(status), error.message);
    return status;
}

static void test_version(void) {
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", TOKENCACHE_VERSION_MAJOR, TOKENCACHE_VERSION_MINOR, TOKENCACHE_VERSION_PATCH);
    CHECK(strcmp(tokencache_version(), expected) == 0, "version %s, header %s", tokencache_version(), expected);
    CHECK(strcmp(tokencache_status_name(TOKENCACHE_E_NOT_FOUND), "TOKENCACHE_E_NOT_FOUND") == 0, "status name");
    CHECK(strcmp(tokencache_status_name(12345), "TOKENCACHE_E_UNKNOWN") == 0, "unknown status name");
}

/* Bad arguments: an error code and a message, never a crash. */
static void expect_invalid(int status, const tokencache_error *error, const char *what, const char *needle) {
    CHECK(status == TOKENCACHE_E_INVALID_ARGUMENT, "%s: status %s", what, tokencache_status_name(status));
    CHECK(error->code == status, "%s: error.code %d", what, error->code);
    CHECK(error->message[0] != '\0' && strstr(error->message, needle) != NULL, "%s: message '%s' lacks '%s'", what, error->message, needle);
    CHECK(tokencache_error_reason(error) == TOKENCACHE_REASON_NONE, "%s: reason %s", what, tokencache_reason_name(tokencache_error_reason(error)));
}

/* Reasons (0.5): kept in the caller's 0.1-sized struct, readable whatever the struct held before. */
static void test_reasons(void) {
    CHECK(tokencache_error_reason(NULL) == TOKENCACHE_REASON_NONE, "reason of NULL");
    tokencache_error error = {0};
    CHECK(tokencache_error_reason(&error) == TOKENCACHE_REASON_NONE, "reason of an unfilled struct");
    CHECK(strcmp(tokencache_reason_name(TOKENCACHE_REASON_NO_DISPLAY), "TOKENCACHE_REASON_NO_DISPLAY") == 0, "reason name");
    CHECK(strcmp(tokencache_reason_name(12345), "TOKENCACHE_REASON_UNKNOWN") == 0, "unknown reason name");
    CHECK(strcmp(tokencache_status_name(TOKENCACHE_E_PORTAL_CANCELLED), "TOKENCACHE_E_PORTAL_CANCELLED") == 0
          && strcmp(tokencache_status_name(TOKENCACHE_E_PORTAL_FAILED), "TOKENCACHE_E_PORTAL_FAILED") == 0, "portal status names");
    /* A struct full of garbage that looks like a kept reason, then a failure with no finer reason:
       NONE, not the garbage. */
    memset(&error, 0xAB, sizeof error);
    memcpy(error.message + 508, "RC\x1e", 4);
    tokencache_store *store = NULL;
    CHECK(tokencache_store_open("not a group!", TOKENCACHE_BACKEND_FILE, &store, &error) == TOKENCACHE_E_INVALID_ARGUMENT, "bad group");
    CHECK(tokencache_error_reason(&error) == TOKENCACHE_REASON_NONE, "reason after garbage: %d", tokencache_error_reason(&error));
    CHECK(strlen(error.message) < 508, "message runs into the reason");
}

static void test_bad_arguments(tokencache_store *store) {
    tokencache_error error;
    tokencache_store *other = (tokencache_store *)0x1;
    tokencache_accounts *accounts = (tokencache_accounts *)0x1;
    char *token = (char *)0x1;
    const char *invalid_utf8 = "org.\xff\xfe.example";
#define RESET() memset(&error, 0, sizeof error)
    RESET(); expect_invalid(tokencache_store_open(invalid_utf8, TOKENCACHE_BACKEND_SECRET_SERVICE, &other, &error), &error, "group not UTF-8", "UTF-8");
    CHECK(other == NULL, "store out not cleared");
    RESET(); expect_invalid(tokencache_store_open("not a group", TOKENCACHE_BACKEND_SECRET_SERVICE, &other, &error), &error, "unknown group name", "group");
    RESET(); expect_invalid(tokencache_store_open("", TOKENCACHE_BACKEND_FILE, &other, &error), &error, "empty group", "group");
    RESET(); expect_invalid(tokencache_store_open(GROUP, (tokencache_backend)7, &other, &error), &error, "backend value", "backend");
    RESET(); expect_invalid(tokencache_store_open(GROUP, TOKENCACHE_BACKEND_SECRET_SERVICE, NULL, &error), &error, "NULL out", "store");
    CHECK(tokencache_store_open(GROUP, TOKENCACHE_BACKEND_SECRET_SERVICE, NULL, NULL) == TOKENCACHE_E_INVALID_ARGUMENT, "NULL error pointer");
    RESET(); expect_invalid(tokencache_store_accounts(NULL, NULL, &accounts, &error), &error, "NULL store", "store");
    CHECK(accounts == NULL, "accounts out not cleared");
    RESET(); expect_invalid(tokencache_store_accounts(store, "not a client id", &accounts, &error), &error, "client ID", "client");
    RESET(); expect_invalid(tokencache_store_accounts(store, "\xc3\x28", &accounts, &error), &error, "client ID not UTF-8", "UTF-8");
    RESET(); expect_invalid(tokencache_store_accounts((tokencache_store *)accounts, NULL, &accounts, &error), &error, "NULL handle", "store");
    RESET(); expect_invalid(tokencache_store_find_access_token(store, NULL, USERNAME, "User.Read", NULL, &token, NULL, &error), &error, "NULL client", "client");
    CHECK(token == NULL, "token out not cleared");
    RESET(); expect_invalid(tokencache_store_find_access_token(store, CLIENT_A, NULL, "User.Read", NULL, &token, NULL, &error), &error, "NULL account", "account");
    RESET(); expect_invalid(tokencache_store_find_access_token(store, CLIENT_A, USERNAME, NULL, NULL, &token, NULL, &error), &error, "NULL scopes", "scopes");
    RESET(); expect_invalid(tokencache_store_find_access_token(store, CLIENT_A, USERNAME, "User.Read", "not a url", &token, NULL, &error), &error, "authority", "uthority");
    RESET(); expect_invalid(tokencache_store_find_access_token(store, CLIENT_A, USERNAME, "User.Read", NULL, NULL, NULL, &error), &error, "NULL token out", "access_token");
    RESET(); expect_invalid(tokencache_store_save_response(store, CLIENT_A, AUTHORITY, "User.Read", NULL, 10, NULL, &error), &error, "NULL response", "response");
    RESET(); expect_invalid(tokencache_store_save_response(store, CLIENT_A, AUTHORITY, "User.Read", "{}", 0, NULL, &error), &error, "empty response", "length");
    RESET();
    int status = tokencache_store_save_response(store, CLIENT_A, AUTHORITY, "User.Read", "{\"access_token\":", 16, NULL, &error);
    CHECK(status == TOKENCACHE_E_INVALID_TOKEN_RESPONSE, "truncated JSON: %s", tokencache_status_name(status));
    RESET(); expect_invalid(tokencache_store_sign_out(store, CLIENT_A, NULL, &error), &error, "sign out NULL account", "account");
    RESET(); status = tokencache_store_remove_account(store, "nobody@example.com", NULL, &error);
    CHECK(status == TOKENCACHE_E_NOT_FOUND && error.code == TOKENCACHE_E_NOT_FOUND, "unknown account: %s", tokencache_status_name(status));
    RESET(); expect_invalid(tokencache_acquire_token_silent(store, CLIENT_A, AUTHORITY, USERNAME, "User.Read", 0x80, &token, NULL, &error), &error, "flags", "flags");
    RESET(); expect_invalid(tokencache_diagnose(NULL, TOKENCACHE_BACKEND_AUTO, NULL, NULL, &error), &error, "NULL report", "report");
    RESET(); expect_invalid(tokencache_store_watch_accounts(store, CLIENT_A, 10, NULL, NULL, NULL, &error), &error, "NULL callback", "callback");
    RESET(); expect_invalid(tokencache_sign_in_device_code(store, CLIENT_A, AUTHORITY, "User.Read", NULL, NULL, 0, &token, NULL, &error), &error, "NULL on_code", "on_code");
    RESET(); expect_invalid(tokencache_sign_in_browser(store, CLIENT_A, "not a url", "User.Read", NULL, 0, &token, NULL, &error), &error, "browser authority", "uthority");
    RESET(); expect_invalid(tokencache_sign_in_browser(store, CLIENT_A, AUTHORITY, "User.Read", "\xc3\x28", 0, &token, NULL, &error), &error, "login hint not UTF-8", "UTF-8");
    RESET(); expect_invalid(tokencache_sign_in_browser(store, CLIENT_A, AUTHORITY, "User.Read", NULL, 0, NULL, NULL, &error), &error, "browser NULL token out", "access_token");
    CHECK(strcmp(tokencache_status_name(TOKENCACHE_E_BROWSER_UNAVAILABLE), "TOKENCACHE_E_BROWSER_UNAVAILABLE") == 0, "new status name");
    /* Free functions and accessors accept NULL. */
    tokencache_store_close(NULL); tokencache_accounts_free(NULL); tokencache_token_info_free(NULL);
    tokencache_secret_free(NULL); tokencache_string_free(NULL); tokencache_watch_stop(NULL);
    CHECK(tokencache_accounts_count(NULL) == 0 && tokencache_accounts_username(NULL, 0) == NULL, "NULL accessors");
    CHECK(tokencache_token_info_scheme(NULL) == NULL && tokencache_token_info_expires_on(NULL) == 0, "NULL info accessors");
    /* A well-formed group nobody used is empty, not an error. */
    tokencache_store *unknown = open_store("org.example.never-used");
    RESET(); status = tokencache_store_accounts(unknown, NULL, &accounts, &error);
    CHECK(status == TOKENCACHE_OK && tokencache_accounts_count(accounts) == 0, "unused group: %s", tokencache_status_name(status));
    tokencache_accounts_free(accounts);
    tokencache_store_close(unknown);
    /* Messages are cut at a character boundary within the struct. */
    char long_group[2000];
    memset(long_group, 'a', sizeof long_group - 1);
    long_group[sizeof long_group - 1] = '\0';
    RESET(); tokencache_store_open(long_group, TOKENCACHE_BACKEND_FILE, &other, &error);
    CHECK(memchr(error.message, '\0', sizeof error.message) != NULL, "message not terminated");
#undef RESET
}

static void test_round_trip(tokencache_store *store) {
    tokencache_error error = {0};
    CHECK(save(store, CLIENT_A, "1") == TOKENCACHE_OK, "save");

    tokencache_accounts *accounts = NULL;
    CHECK(tokencache_store_accounts(store, CLIENT_A, &accounts, &error) == TOKENCACHE_OK, "accounts: %s", error.message);
    CHECK(tokencache_accounts_count(accounts) == 1, "%zu accounts", tokencache_accounts_count(accounts));
    const char *home = tokencache_accounts_home_account_id(accounts, 0);
    CHECK(home && strcmp(home, HOME_ID) == 0, "home %s", home ? home : "(null)");
    CHECK(strcmp(tokencache_accounts_username(accounts, 0), USERNAME) == 0, "username");
    CHECK(strcmp(tokencache_accounts_environment(accounts, 0), "login.microsoftonline.com") == 0, "environment");
    CHECK(strcmp(tokencache_accounts_tenant_id(accounts, 0), "11111111-1111-1111-1111-111111111111") == 0, "tenant");
    CHECK(strcmp(tokencache_accounts_local_account_id(accounts, 0), "c0ffee00-0000-0000-0000-000000000001") == 0, "local id");
    CHECK(tokencache_accounts_username(accounts, 1) == NULL, "index past the end");
    CHECK(tokencache_accounts_username(accounts, (size_t)-1) == NULL, "index past INT64_MAX");
    tokencache_accounts_free(accounts);

    /* Client B (same family) sees the account through the family refresh token. */
    CHECK(tokencache_store_accounts(store, CLIENT_B, &accounts, &error) == TOKENCACHE_OK, "accounts B");
    CHECK(tokencache_accounts_count(accounts) == 1, "family SSO: %zu accounts for B", tokencache_accounts_count(accounts));
    tokencache_accounts_free(accounts);

    char *token = NULL;
    tokencache_token_info *info = NULL;
    int status = tokencache_store_find_access_token(store, CLIENT_A, USERNAME, "User.Read", NULL, &token, &info, &error);
    CHECK(status == TOKENCACHE_OK, "find: %s %s", tokencache_status_name(status), error.message);
    CHECK(token && strcmp(token, "at-capi-1") == 0, "token");
    CHECK(info && strcmp(tokencache_token_info_scheme(info), "Bearer") == 0, "scheme");
    CHECK(info && strstr(tokencache_token_info_scopes(info), "User.Read") != NULL, "scopes %s", info ? tokencache_token_info_scopes(info) : "");
    CHECK(info && strcmp(tokencache_token_info_home_account_id(info), HOME_ID) == 0, "info home");
    CHECK(info && strcmp(tokencache_token_info_username(info), USERNAME) == 0, "info username");
    CHECK(info && tokencache_token_info_is_from_cache(info) == 1, "from cache");
    long long remaining = info ? (long long)(tokencache_token_info_expires_on(info) - time(NULL)) : 0;
    CHECK(remaining > 3500 && remaining <= 3600, "expires in %lld s", remaining);
    tokencache_secret_free(token);
    tokencache_token_info_free(info);

    /* By home account ID too; acquire silent returns the cached token without any request. */
    token = NULL;
    status = tokencache_acquire_token_silent(store, CLIENT_A, AUTHORITY, HOME_ID, "User.Read", 0, &token, NULL, &error);
    CHECK(status == TOKENCACHE_OK && token && strcmp(token, "at-capi-1") == 0, "silent: %s %s", tokencache_status_name(status), error.message);
    tokencache_secret_free(token);

    /* Another scope: not cached. */
    token = (char *)0x1;
    memset(&error, 0, sizeof error);
    status = tokencache_store_find_access_token(store, CLIENT_A, USERNAME, "Files.Read", NULL, &token, NULL, &error);
    CHECK(status == TOKENCACHE_E_NOT_FOUND && token == NULL && error.code == status, "other scope: %s", tokencache_status_name(status));

    /* Sign app A out: A no longer lists the account nor finds its token; B keeps it. */
    CHECK(tokencache_store_sign_out(store, CLIENT_A, USERNAME, &error) == TOKENCACHE_OK, "sign out: %s", error.message);
    CHECK(tokencache_store_accounts(store, CLIENT_A, &accounts, &error) == TOKENCACHE_OK && tokencache_accounts_count(accounts) == 0, "A after sign-out");
    tokencache_accounts_free(accounts);
    CHECK(tokencache_store_find_access_token(store, CLIENT_A, USERNAME, "User.Read", NULL, &token, NULL, &error) == TOKENCACHE_E_NOT_FOUND, "A token after sign-out");
    CHECK(tokencache_store_accounts(store, CLIENT_B, &accounts, &error) == TOKENCACHE_OK && tokencache_accounts_count(accounts) == 1, "B after A's sign-out");
    tokencache_accounts_free(accounts);
    /* Signing A out again: the same rule as `tokencache logout`, nothing changed. */
    status = tokencache_store_sign_out(store, CLIENT_A, USERNAME, &error);
    CHECK(status == TOKENCACHE_E_NOT_FOUND && tokencache_error_reason(&error) == TOKENCACHE_REASON_CLIENT_NOT_SIGNED_IN, "sign out twice: %s", tokencache_status_name(status));

    /* Remove everywhere. */
    size_t removed = 0;
    CHECK(tokencache_store_remove_account(store, HOME_ID, &removed, &error) == TOKENCACHE_OK && removed > 0, "remove: %zu", removed);
    CHECK(tokencache_store_accounts(store, NULL, &accounts, &error) == TOKENCACHE_OK && tokencache_accounts_count(accounts) == 0, "after remove");
    tokencache_accounts_free(accounts);
}

/* Silent acquisition with no refresh token: interaction required, no request made. */
static void test_silent_without_refresh_token(tokencache_store *store) {
    char *json = "{\"token_type\":\"Bearer\",\"expires_in\":3600,\"scope\":\"User.Read\",\"access_token\":\"at-capi-nort\","
                 "\"client_info\":\"" CLIENT_INFO "\",\"id_token\":\"" ID_TOKEN "\"}";
    tokencache_error error = {0};
    CHECK(tokencache_store_save_response(store, CLIENT_A, AUTHORITY, "User.Read", json, strlen(json), NULL, &error) == TOKENCACHE_OK, "save without RT: %s", error.message);
    char *token = NULL;
    int status = tokencache_acquire_token_silent(store, CLIENT_A, AUTHORITY, USERNAME, "Files.Read", TOKENCACHE_FORCE_REFRESH, &token, NULL, &error);
    CHECK(status == TOKENCACHE_E_INTERACTION_REQUIRED && token == NULL, "silent without RT: %s", tokencache_status_name(status));
    CHECK(error.hint[0] != '\0', "hint empty");
    /* The reason, not the text, says what to do; the hint names the C sign-in, not Swift API. */
    CHECK(tokencache_error_reason(&error) == TOKENCACHE_REASON_NO_REFRESH_TOKEN, "reason %s", tokencache_reason_name(tokencache_error_reason(&error)));
    CHECK(strstr(error.hint, "tokencache_sign_in_browser") != NULL && strstr(error.hint, "interactively") == NULL, "hint: %s", error.hint);
    CHECK(strstr(error.message, "at-capi") == NULL && strstr(error.hint, "at-capi") == NULL, "secret in error");
    tokencache_store_remove_account(store, USERNAME, NULL, NULL);
}

struct watch_state { int calls; size_t last_count; int errors; };
static void on_accounts(const tokencache_accounts *accounts, const tokencache_error *error, void *user_data) {
    struct watch_state *state = user_data;
    if (accounts == NULL) { state->errors++; (void)error; return; }
    __atomic_store_n(&state->last_count, tokencache_accounts_count(accounts), __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&state->calls, 1, __ATOMIC_SEQ_CST);
}

static void test_watch(tokencache_store *store) {
    struct watch_state state = {0};
    tokencache_watch *watch = NULL;
    tokencache_error error = {0};
    CHECK(tokencache_store_watch_accounts(store, CLIENT_A, 20, on_accounts, &state, &watch, &error) == TOKENCACHE_OK, "watch: %s", error.message);
    for (int i = 0; i < 3000 && __atomic_load_n(&state.calls, __ATOMIC_SEQ_CST) < 1; i++) usleep(10000);  /* up to 30 s */
    CHECK(state.calls == 1 && state.last_count == 0, "first report: %d calls, %zu accounts", state.calls, state.last_count);
    /* A change by another store (as another process would make it) is reported. */
    tokencache_store *other = open_store(GROUP);
    save(other, CLIENT_A, "w");
    for (int i = 0; i < 3000 && __atomic_load_n(&state.calls, __ATOMIC_SEQ_CST) < 2; i++) usleep(10000);
    CHECK(state.calls == 2 && state.last_count == 1, "after save: %d calls, %zu accounts", state.calls, state.last_count);
    tokencache_watch_stop(watch);
    int calls = state.calls;
    tokencache_store_remove_account(other, USERNAME, NULL, NULL);
    usleep(100000);
    CHECK(state.calls == calls, "callback after stop");
    CHECK(state.errors == 0, "%d read errors", state.errors);
    tokencache_store_close(other);
}

static void test_diagnose(void) {
    char *report = NULL;
    int usable = -1;
    tokencache_error error = {0};
    CHECK(tokencache_diagnose(GROUP, TOKENCACHE_BACKEND_SECRET_SERVICE, &report, &usable, &error) == TOKENCACHE_OK, "diagnose: %s", error.message);
    CHECK(usable == 1, "usable %d", usable);
    CHECK(report && strstr(report, "Policy: secret-service") && strstr(report, "Secret Service: ok"), "report:\n%s", report ? report : "");
    tokencache_string_free(report);
}

#ifdef TOKENCACHE_TEST_WIPE
static void test_secret_wiped(tokencache_store *store) {
    save(store, CLIENT_A, "wipe");
    char *token = NULL;
    tokencache_error error = {0};
    CHECK(tokencache_store_find_access_token(store, CLIENT_A, USERNAME, "User.Read", NULL, &token, NULL, &error) == TOKENCACHE_OK, "find");
    /* The control: tokencache_string_free does not wipe, and the hook sees it. */
    char *copy = strdup(token);
    watched = copy; watched_length = strlen(copy); watched_freed = 0;
    tokencache_string_free(copy);
    CHECK(watched_freed == 1 && watched_zeroed == 0, "control: freed %d zeroed %d", watched_freed, watched_zeroed);
    watched = token; watched_length = strlen(token); watched_freed = 0;
    tokencache_secret_free(token);
    CHECK(watched_freed == 1 && watched_zeroed == 1, "secret buffer: freed %d zeroed %d", watched_freed, watched_zeroed);
    tokencache_store_remove_account(store, USERNAME, NULL, NULL);
}
#endif

/* The same calls many times: with AddressSanitizer, LeakSanitizer reports anything unfreed at
   exit; without, the heap in use must not grow with the number of calls. */
static void test_no_leaks(tokencache_store *store) {
    long iterations = getenv("TOKENCACHE_C_LEAK_ITERATIONS") ? atol(getenv("TOKENCACHE_C_LEAK_ITERATIONS")) : 10000;
    save(store, CLIENT_A, "leak");
    size_t baseline = 0;
    for (long i = 0; i < iterations; i++) {
        if (i == iterations / 10) baseline = mallinfo2().uordblks;
        tokencache_error error;
        tokencache_accounts *accounts = NULL;
        char *token = NULL;
        tokencache_token_info *info = NULL;
        if (tokencache_store_accounts(store, CLIENT_A, &accounts, &error) != TOKENCACHE_OK || tokencache_accounts_count(accounts) != 1) {
            CHECK(0, "iteration %ld: accounts", i); break;
        }
        tokencache_accounts_free(accounts);
        if (tokencache_store_find_access_token(store, CLIENT_A, USERNAME, "User.Read", NULL, &token, &info, &error) != TOKENCACHE_OK) {
            CHECK(0, "iteration %ld: find: %s", i, error.message); break;
        }
        tokencache_secret_free(token);
        tokencache_token_info_free(info);
        if (tokencache_store_find_access_token(store, CLIENT_A, "\xff", "User.Read", NULL, &token, NULL, &error) != TOKENCACHE_E_INVALID_ARGUMENT) {
            CHECK(0, "iteration %ld: invalid argument", i); break;
        }
    }
    /* Signed: the heap in use may end below the baseline (memory the first calls kept, freed
       later), which is no growth; as size_t the difference wrapped to 2^64 and failed the check. */
    long long growth = (long long)mallinfo2().uordblks - (long long)baseline;
    fprintf(stderr, "leak loop: %ld iterations of 3 calls, heap in use changed by %lld bytes after the first 10%%\n", iterations, growth);
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(growth < 256 * 1024, "heap grew %lld bytes over %ld iterations", growth, iterations);
#endif
    tokencache_store_remove_account(store, USERNAME, NULL, NULL);
}

/* POSTs a JSON body to the local identity provider's /control; 0 when it answered 200. */
static int idp_control(int port, const char *json) {
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) { if (fd >= 0) close(fd); return -1; }
    char request[1024];
    int length = snprintf(request, sizeof request, "POST /control HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: %zu\r\n\r\n%s", strlen(json), json);
    char reply[64] = {0}, rest[256];
    int ok = write(fd, request, (size_t)length) == length && read(fd, reply, sizeof reply - 1) > 0 && strstr(reply, " 200 ") != NULL;
    while (read(fd, rest, sizeof rest) > 0) {}  /* to the end (HTTP/1.0 closes), so the server is not reset */
    close(fd);
    return ok ? 0 : -1;
}

struct device_code_answer {
    int port;
    const char *answer;
    pthread_t caller;
    int calls;
};

/* The device code callback: checks what it is given and answers at the identity provider. */
static void on_device_code(const char *user_code, const char *verification_uri, const char *message, void *user_data) {
    struct device_code_answer *answer = user_data;
    answer->calls++;
    CHECK(pthread_equal(pthread_self(), answer->caller), "on_code runs on the calling thread");
    CHECK(user_code[0] != '\0' && strstr(message, user_code) != NULL, "message '%s' names the code", message);
    CHECK(strncmp(verification_uri, "http://127.0.0.1:", 17) == 0, "verification URI %s", verification_uri);
    char json[256];
    snprintf(json, sizeof json, "{\"%s\": \"%s\"}", answer->answer, user_code);
    CHECK(idp_control(answer->port, json) == 0, "POST /control %s", json);
}

static int device_code_sign_in(const char *group, const char *client, int port, const char *answer_name) {
    char authority[128], setup[512];
    snprintf(authority, sizeof authority, "http://127.0.0.1:%d/11111111-1111-1111-1111-111111111111", port);
    snprintf(setup, sizeof setup, "{\"sign_in_user\": {\"uid\": \"c0ffee00-0000-0000-0000-000000000001\", "
             "\"utid\": \"11111111-1111-1111-1111-111111111111\", \"username\": \"" USERNAME "\"}, "
             "\"family_clients\": {\"%s\": \"1\"}}", client);
    if (idp_control(port, setup) != 0) { fprintf(stderr, "device-code: the identity provider did not answer\n"); return 2; }
    tokencache_store *store = open_store(group);
    struct device_code_answer answer = {.port = port, .answer = answer_name, .caller = pthread_self()};
    char *token = NULL;
    tokencache_token_info *info = NULL;
    tokencache_error error = {0};
    int status = tokencache_sign_in_device_code(store, client, authority, "User.Read", on_device_code, &answer, 60, &token,
                                                &info, &error);
    CHECK(answer.calls == 1, "on_code called %d times", answer.calls);
    if (status == TOKENCACHE_OK) {
        CHECK(strcmp(tokencache_token_info_username(info), USERNAME) == 0, "username %s", tokencache_token_info_username(info));
        CHECK(tokencache_token_info_is_from_cache(info) == 0, "a new token");
        printf("%s\n", token);
    } else {
        CHECK(token == NULL && info == NULL && error.code == status, "outputs cleared on failure");
        printf("%s\n", tokencache_status_name(status));
    }
    tokencache_secret_free(token);
    tokencache_token_info_free(info);
    tokencache_store_close(store);
    return status == TOKENCACHE_OK && !failures ? 0 : 1;
}

/* Forced silent refreshes on one (warm) store handle. */
static int refresh(const char *group, const char *client, int port, const char *account, int count) {
    char authority[128];
    snprintf(authority, sizeof authority, "http://127.0.0.1:%d/11111111-1111-1111-1111-111111111111", port);
    tokencache_store *store = open_store(group);
    int status = TOKENCACHE_OK;
    for (int i = 0; i < count && status == TOKENCACHE_OK; i++) {
        char *token = NULL;
        tokencache_error error = {0};
        status = tokencache_acquire_token_silent(store, client, authority, account, "User.Read", TOKENCACHE_FORCE_REFRESH,
                                                 &token, NULL, &error);
        if (status == TOKENCACHE_OK) printf("%s\n", token);
        else fprintf(stderr, "refresh %d: %s: %s\n", i + 1, tokencache_status_name(status), error.message);
        tokencache_secret_free(token);
    }
    tokencache_store_close(store);
    return status == TOKENCACHE_OK ? 0 : 1;
}

/* Continuous access evaluation on a group's store: declares `capabilities` ("-": none), reads the
   claims of a resource's WWW-Authenticate value `header` ("-": none) and asks for a token with
   them at the local provider on `port`. Prints the token, or on failure the status and, when the
   refusal asked for claims, "required_claims <json>". */
static int claims(const char *group, const char *client, int port, const char *capabilities, const char *header) {
    char authority[128];
    snprintf(authority, sizeof authority, "http://127.0.0.1:%d/11111111-1111-1111-1111-111111111111", port);
    tokencache_store *store = open_store(group);
    tokencache_error error = {0};
    char *decoded = NULL, *token = NULL, *required = NULL;
    int status = tokencache_store_set_client_capabilities(store, strcmp(capabilities, "-") == 0 ? NULL : capabilities, &error);
    if (status == TOKENCACHE_OK && strcmp(header, "-") != 0)
        status = tokencache_claims_from_www_authenticate(header, &decoded, &error);
    if (status == TOKENCACHE_OK)
        status = tokencache_acquire_token_with_claims(store, client, authority, NULL, "User.Read", decoded, &token, NULL,
                                                      &required, &error);
    if (status == TOKENCACHE_OK) printf("%s\n", token);
    else {
        fprintf(stderr, "claims: %s: %s\n", tokencache_status_name(status), error.message);
        if (required != NULL) printf("required_claims %s\n", required);
    }
    tokencache_secret_free(token);
    tokencache_string_free(decoded);
    tokencache_string_free(required);
    tokencache_store_close(store);
    return status == TOKENCACHE_OK ? 0 : 1;
}

/* One silent token on the default store (NULL group, backend AUTO, or "file"): the token agent's
   when TOKENCACHE_AGENT_SOCK is set. Prints the token and the account it is for. */
static int silent(const char *backend, const char *client, const char *authority, const char *account, const char *scopes,
                  const char *sso_stores) {
    tokencache_store *store = NULL;
    tokencache_error error = {0};
    int status = tokencache_store_open(NULL, strcmp(backend, "file") == 0 ? TOKENCACHE_BACKEND_FILE : TOKENCACHE_BACKEND_AUTO,
                                       &store, &error);
    if (status == TOKENCACHE_OK && sso_stores) status = tokencache_store_set_sso_stores(store, sso_stores, &error);
    /* TEST_BROKER=always|when-available: the store asks the identity broker. */
    const char *broker = getenv("TEST_BROKER");
    if (status == TOKENCACHE_OK && broker)
        status = tokencache_store_set_broker(store, strcmp(broker, "always") == 0 ? TOKENCACHE_BROKER_ALWAYS
                                                    : TOKENCACHE_BROKER_WHEN_AVAILABLE, &error);
    char *token = NULL;
    tokencache_token_info *info = NULL;
    if (status == TOKENCACHE_OK)
        status = tokencache_acquire_token_silent(store, client, strcmp(authority, "-") == 0 ? NULL : authority,
                                                 strcmp(account, "-") == 0 ? NULL : account, scopes, 0, &token, &info, &error);
    if (status == TOKENCACHE_OK) printf("%s %s\n", token, tokencache_token_info_username(info));
    else fprintf(stderr, "silent: %s %s: %s (%s)\n", tokencache_status_name(status),
                 tokencache_reason_name(tokencache_error_reason(&error)), error.message, error.hint);
    tokencache_secret_free(token);
    tokencache_token_info_free(info);
    tokencache_store_close(store);
    return status == TOKENCACHE_OK ? 0 : 1;
}

/* The accounts an app (CLIENT, or "-" for the whole group) lists on the default group: one
   "username home_account_id" line each; "auto" lets TOKENCACHE_AGENT_SOCK's agent answer. */
static int list_accounts(const char *backend, const char *client) {
    tokencache_store *store = NULL;
    tokencache_error error = {0};
    tokencache_accounts *accounts = NULL;
    int status = tokencache_store_open(NULL, strcmp(backend, "file") == 0 ? TOKENCACHE_BACKEND_FILE : TOKENCACHE_BACKEND_AUTO,
                                       &store, &error);
    if (status == TOKENCACHE_OK)
        status = tokencache_store_accounts(store, strcmp(client, "-") == 0 ? NULL : client, &accounts, &error);
    if (status == TOKENCACHE_OK)
        for (size_t i = 0; i < tokencache_accounts_count(accounts); i++)
            printf("%s %s\n", tokencache_accounts_username(accounts, i), tokencache_accounts_home_account_id(accounts, i));
    else fprintf(stderr, "accounts: %s %s: %s (%s)\n", tokencache_status_name(status),
                 tokencache_reason_name(tokencache_error_reason(&error)), error.message, error.hint);
    tokencache_accounts_free(accounts);
    tokencache_store_close(store);
    return status == TOKENCACHE_OK ? 0 : 1;
}

/* The account's Graph photo on the default group of the encrypted file: writes it to `path` and
   prints its type and size, or prints "none" when the account has none. */
static int photo(const char *client, const char *authority, const char *account, const char *path, unsigned flags) {
    tokencache_store *store = NULL;
    tokencache_error error = {0};
    int status = tokencache_store_open(NULL, TOKENCACHE_BACKEND_FILE, &store, &error);
    unsigned char *data = NULL;
    size_t length = 0;
    char *type = NULL;
    if (status == TOKENCACHE_OK)
        status = tokencache_account_photo(store, client, authority, strcmp(account, "-") == 0 ? NULL : account, flags,
                                          &data, &length, &type, &error);
    if (status == TOKENCACHE_OK && data == NULL) printf("none\n");
    else if (status == TOKENCACHE_OK) {
        FILE *file = fopen(path, "wb");
        if (file == NULL || fwrite(data, 1, length, file) != length || fclose(file) != 0) status = -1;
        printf("%s %zu\n", type, length);
    } else fprintf(stderr, "photo: %s %s: %s (%s)\n", tokencache_status_name(status),
                   tokencache_reason_name(tokencache_error_reason(&error)), error.message, error.hint);
    tokencache_photo_free(data);
    tokencache_string_free(type);
    tokencache_store_close(store);
    return status == TOKENCACHE_OK ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 7 && strcmp(argv[1], "photo") == 0) return photo(argv[2], argv[3], argv[4], argv[5], (unsigned)atoi(argv[6]));
    if ((argc == 7 || argc == 8) && strcmp(argv[1], "silent") == 0)
        return silent(argv[2], argv[3], argv[4], argv[5], argv[6], argc == 8 ? argv[7] : NULL);
    if (argc == 4 && strcmp(argv[1], "accounts") == 0) return list_accounts(argv[2], argv[3]);
    if (argc == 7 && strcmp(argv[1], "claims") == 0) return claims(argv[2], argv[3], atoi(argv[4]), argv[5], argv[6]);
    if (argc == 7 && strcmp(argv[1], "refresh") == 0) return refresh(argv[2], argv[3], atoi(argv[4]), argv[5], atoi(argv[6]));
    if (argc == 6 && strcmp(argv[1], "device-code") == 0) return device_code_sign_in(argv[2], argv[3], atoi(argv[4]), argv[5]);
    if (argc == 4 && strcmp(argv[1], "save") == 0) {
        tokencache_store *store = open_store(argv[2]);
        int status = save(store, CLIENT_A, argv[3]);
        tokencache_store_close(store);
        return status == TOKENCACHE_OK ? 0 : 1;
    }
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "find") == 0) {
        tokencache_store *store = open_store(argv[2]);
        char *token = NULL;
        tokencache_error error = {0};
        int status = tokencache_store_find_access_token(store, argv[3], argv[4], argv[5], argc == 7 ? argv[6] : NULL, &token, NULL, &error);
        if (status == TOKENCACHE_OK) printf("%s\n", token);
        else fprintf(stderr, "find: %s: %s\n", tokencache_status_name(status), error.message);
        tokencache_secret_free(token);
        tokencache_store_close(store);
        return status == TOKENCACHE_OK ? 0 : status == TOKENCACHE_E_NOT_FOUND ? 3 : 1;
    }
    if (argc != 1) { fprintf(stderr, "usage: %s [save GROUP TAG | find GROUP CLIENT ACCOUNT SCOPES [AUTHORITY] | device-code GROUP CLIENT PORT ANSWER | refresh GROUP CLIENT PORT ACCOUNT COUNT | silent auto|file CLIENT AUTHORITY|- ACCOUNT|- SCOPES [SSO-STORES] | photo CLIENT AUTHORITY ACCOUNT|- FILE FLAGS | accounts auto|file CLIENT|-]\n", argv[0]); return 64; }
    tokencache_store *store = open_store(GROUP);
    test_version();
    test_reasons();
    test_bad_arguments(store);
    test_round_trip(store);
    test_silent_without_refresh_token(store);
    test_watch(store);
    test_diagnose();
#ifdef TOKENCACHE_TEST_WIPE
    test_secret_wiped(store);
#endif
    test_no_leaks(store);
    tokencache_store_close(store);
    fprintf(stderr, "%s: %s\n", argv[0], failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
