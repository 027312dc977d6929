/*
 * tokencache.h: the C interface of swift-tokencache, a shared MSAL token cache for Linux
 * (Secret Service keyring, or an encrypted file where there is none).
 *
 * Link with `pkg-config --cflags --libs tokencache` (libtokencache.so.0).
 *
 * Conventions, for every function below:
 *
 *  - Status codes. Functions that can fail return an int: TOKENCACHE_OK (0) on success, else one
 *    of the TOKENCACHE_E_* codes, and fill *error when `error` is not NULL. Nothing else reports
 *    failure: no Swift error, C++ exception or signal crosses this interface. Out parameters are
 *    set to NULL (or 0) on failure.
 *  - Strings are NUL-terminated UTF-8, in and out. An argument that is not valid UTF-8 is
 *    refused with TOKENCACHE_E_INVALID_ARGUMENT; so is a NULL pointer where one is required.
 *  - Ownership. `const char *` results of accessors are borrowed: valid until the object they
 *    came from is freed, never freed by the caller. Every object or buffer the library hands
 *    over is freed with the function named next to it:
 *        tokencache_store *          tokencache_store_close
 *        tokencache_accounts *       tokencache_accounts_free
 *        tokencache_token_info *     tokencache_token_info_free
 *        tokencache_watch *          tokencache_watch_stop
 *        char * secret (tokens)      tokencache_secret_free  (wipes, then frees)
 *        char * text (reports)       tokencache_string_free
 *        unsigned char * photo       tokencache_photo_free
 *    Every free function accepts NULL. Inputs remain the caller's: the library copies what it
 *    keeps and never frees or keeps a pointer it was given.
 *  - Blocking. Functions block until done (D-Bus calls to the keyring, file I/O, and for
 *    tokencache_acquire_token_silent HTTP requests of up to about 30 s; the tokencache_sign_in_*
 *    functions until the user has signed in, or their timeout). Call them from a worker
 *    thread in a GUI app. Do not call them from inside Swift async code (they wait on a
 *    semaphore while the library's own tasks run).
 *  - Threads. A tokencache_store may be used from several threads at once (the cache is
 *    locked inside; other processes are kept consistent through the backend). Objects returned
 *    from it (accounts, token info) are immutable: read them from any thread, free them once.
 *    Exceptions are stated per function.
 *  - Secrets. Access tokens are returned in malloc'd buffers that the caller frees with
 *    tokencache_secret_free, which overwrites them with zeros first. Token responses passed in
 *    remain the caller's to wipe. No secret is ever put in an error message. The library writes
 *    nothing to standard output or standard error and does not log.
 *  - Versioning. The soname is libtokencache.so.0. Symbols carry the version of the release
 *    that added them: TOKENCACHE_0.1, TOKENCACHE_0.2 for tokencache_sign_in_*, and
 *    TOKENCACHE_0.3 for tokencache_store_set_sso_stores, TOKENCACHE_0.4 for tokencache_native_*,
 *    TOKENCACHE_0.5 for tokencache_error_reason and tokencache_reason_name, TOKENCACHE_0.6 for
 *    tokencache_account_photo, tokencache_photo_free, the claims challenges and client
 *    capabilities, and tokencache_store_set_broker. Functions
 *    are only ever added (under a new symbol version node); an incompatible change would raise
 *    the soname. Error codes and enum values never change
 *    meaning; new ones may be added, so treat unknown codes as failures.
 */
#ifndef TOKENCACHE_H
#define TOKENCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; compare with tokencache_version() at run time. */
#define TOKENCACHE_VERSION_MAJOR 0
#define TOKENCACHE_VERSION_MINOR 6
#define TOKENCACHE_VERSION_PATCH 0

/* Status codes: returned by every function that can fail, and in tokencache_error.code. */
enum {
    TOKENCACHE_OK = 0,
    /* An argument was NULL, not UTF-8, or malformed (client ID, group, authority, scopes). */
    TOKENCACHE_E_INVALID_ARGUMENT = 1,
    /* No account or usable token matched the request. */
    TOKENCACHE_E_NOT_FOUND = 2,
    /* A token endpoint response was malformed; nothing was saved. */
    TOKENCACHE_E_INVALID_TOKEN_RESPONSE = 3,
    /* An account named without an authority is at hosts of different clouds (another host may
       have saved a response claiming its home account ID): nothing is guessed; pass the
       authority it signed in at (since 0.3). */
    TOKENCACHE_E_AMBIGUOUS_ACCOUNT = 5,
    /* Cache data could not be read; nothing was changed. */
    TOKENCACHE_E_INVALID_CACHE_DATA = 4,

    /* Secret Service (keyring) */
    TOKENCACHE_E_NO_SESSION_BUS = 10,
    TOKENCACHE_E_NO_SECRET_SERVICE = 11,
    TOKENCACHE_E_LIBSECRET_MISSING = 12,  /* no longer returned: libsecret is not loaded */
    TOKENCACHE_E_LIBGCRYPT_MISSING = 13,
    TOKENCACHE_E_COLLECTION_MISSING = 14,
    /* The keyring is locked and was not unlocked; nothing was read as empty. */
    TOKENCACHE_E_KEYRING_LOCKED = 15,
    TOKENCACHE_E_PROMPT_DISMISSED = 16,
    TOKENCACHE_E_TIMED_OUT = 17,
    TOKENCACHE_E_SECRET_SERVICE_FAILURE = 18,

    /* Encrypted file */
    TOKENCACHE_E_FILE_AUTHENTICATION_FAILED = 20,
    TOKENCACHE_E_FILE_ROLLED_BACK = 21,
    TOKENCACHE_E_FILE_MISMATCH = 22,
    TOKENCACHE_E_UNSAFE_FILE = 23,
    TOKENCACHE_E_FILE_SYSTEM = 24,
    TOKENCACHE_E_CRYPTO = 25,
    TOKENCACHE_E_LIBCRYPTO_MISSING = 26,

    /* Sign-in */
    TOKENCACHE_E_MIGRATION_NOT_VERIFIED = 30,
    /* Silent sign-in is impossible (no refresh token, invalid_grant, consent, claims
       challenge): sign the user in interactively. */
    TOKENCACHE_E_INTERACTION_REQUIRED = 31,
    TOKENCACHE_E_USER_MISMATCH = 32,
    /* The token endpoint could not be reached; retry later. */
    TOKENCACHE_E_NETWORK = 33,
    TOKENCACHE_E_LIBCURL_MISSING = 34,
    TOKENCACHE_E_SERVER_ERROR = 35,

    /* The requested backend cannot be used here. */
    TOKENCACHE_E_BACKEND_UNAVAILABLE = 40,
    /* A sandboxed app (Flatpak, Snap): the Secret portal's request for the app's keyring secret
       was cancelled (since 0.5). Nothing was read or changed. */
    TOKENCACHE_E_PORTAL_CANCELLED = 41,
    /* A sandboxed app: the Secret portal could not give the app's keyring secret (no portal, no
       Secret portal backend, or it failed; since 0.5). Nothing was read or changed. */
    TOKENCACHE_E_PORTAL_FAILED = 42,
    /* The process already runs as many blocking calls (keyring, file, lock, HTTP) as the
       library's thread ceiling allows (since 0.6); nothing was started: retry when fewer run. */
    TOKENCACHE_E_OVERLOADED = 43,

    /* Interactive and device code sign-in (tokencache_sign_in_*; since 0.2). Nothing is saved
       when a sign-in fails. */
    /* The user cancelled the sign-in (the sign-in page's Cancel). */
    TOKENCACHE_E_CANCELLED = 50,
    /* The user or an administrator declined (access_denied). */
    TOKENCACHE_E_ACCESS_DENIED = 51,
    /* The authority refused the sign-in (another OAuth error; the message names it). */
    TOKENCACHE_E_AUTHORIZATION_FAILED = 52,
    /* The browser's redirect carried another state than the one sent; nothing was redeemed. */
    TOKENCACHE_E_STATE_MISMATCH = 53,
    /* The loopback redirect listener could not be opened or failed. */
    TOKENCACHE_E_PORT_UNAVAILABLE = 54,
    /* No browser could be opened (no desktop portal, no display, no xdg-open): use the device
       code sign-in instead. */
    TOKENCACHE_E_BROWSER_UNAVAILABLE = 55,
    /* The authority does not offer this flow (no device authorization or authorization
       endpoint in its discovery, as on AD FS before 2019 for device codes). */
    TOKENCACHE_E_UNSUPPORTED_FLOW = 56,

    /* Native authentication (tokencache_native_*; since 0.4). Nothing is saved on these. */
    /* The server answered redirect: sign in with tokencache_sign_in_browser instead. */
    TOKENCACHE_E_BROWSER_REQUIRED = 60,
    /* No account has this username. */
    TOKENCACHE_E_USER_NOT_FOUND = 61,
    /* The password is wrong. */
    TOKENCACHE_E_INVALID_CREDENTIALS = 62,
    /* The code was wrong three times (the prompt is asked again after each wrong one). */
    TOKENCACHE_E_INVALID_CODE = 63,
    /* Sign-up: the user exists; sign in instead. */
    TOKENCACHE_E_USER_ALREADY_EXISTS = 64,
    /* The (new) password breaks the tenant's policy; the message names how. */
    TOKENCACHE_E_PASSWORD_POLICY = 65,
    /* Sign-up: attributes fail the user flow's validation; the message names them. */
    TOKENCACHE_E_ATTRIBUTE_VALIDATION = 66,
    /* The flow's continuation token expired: start again. */
    TOKENCACHE_E_EXPIRED = 67,
    /* Any other refusal of the native-auth API (bad username, native auth not enabled for the
       app, password reset required or impossible); the message and hint say which. */
    TOKENCACHE_E_NATIVE_AUTH_FAILED = 68,

    /* A failure this version of the header has no code for. */
    TOKENCACHE_E_INTERNAL = 99
};

/* Which storage a store uses. */
typedef enum tokencache_backend {
    /* Inside a Flatpak or Snap whose Secret portal answers, the app's portal-keyed file keyring;
       else the Secret Service when a session bus and a provider answer, else the encrypted file.
       A locked keyring is reported (TOKENCACHE_E_KEYRING_LOCKED), not a reason to fall back. */
    TOKENCACHE_BACKEND_AUTO = 0,
    /* The Secret Service only. */
    TOKENCACHE_BACKEND_SECRET_SERVICE = 1,
    /* The encrypted file only ($XDG_DATA_HOME/tokencache). */
    TOKENCACHE_BACKEND_FILE = 2
} tokencache_backend;

/* What went wrong: filled by any failing function given a non-NULL pointer. A plain struct the
   caller allocates (on the stack is fine); the library never allocates for it. `message` says
   what happened, `hint` what to do (empty when there is nothing to do); both are UTF-8,
   NUL-terminated, cut at a character boundary if longer, and never contain secrets. On success
   the struct is left untouched. Since 0.5 `message` holds at most 507 bytes and its NUL: its
   last four bytes keep the reason tokencache_error_reason returns. */
typedef struct tokencache_error {
    int code;
    char message[512];
    char hint[512];
} tokencache_error;

/* Why an error happened, finer than its status code (since 0.5): what tokencache_error_reason
   returns. Choose what to tell the user by the status code and the reason, never by the text of
   message or hint. New reasons may be added: treat unknown ones as TOKENCACHE_REASON_NONE. */
typedef enum tokencache_reason {
    /* Nothing finer than the status code. */
    TOKENCACHE_REASON_NONE = 0,

    /* Secret Service (COLLECTION_MISSING, PROMPT_DISMISSED, TIMED_OUT, SECRET_SERVICE_FAILURE). */
    /* The collection of that label does not exist and creating it was not allowed. */
    TOKENCACHE_REASON_COLLECTION_MISSING = 1,
    /* The provider has no in-memory "session" collection (KWallet, KeePassXC). */
    TOKENCACHE_REASON_SESSION_COLLECTION_UNSUPPORTED = 2,
    /* The provider has no "default" collection: nobody has logged in to the desktop yet. */
    TOKENCACHE_REASON_DEFAULT_COLLECTION_MISSING = 3,
    /* Creating a collection needs a password prompt, which was dismissed or could not be shown. */
    TOKENCACHE_REASON_CREATE_COLLECTION_PROMPT_DISMISSED = 4,
    /* The keyring's unlock prompt was dismissed or could not be shown. */
    TOKENCACHE_REASON_UNLOCK_PROMPT_DISMISSED = 5,
    /* Nobody answered the keyring's unlock prompt in time. */
    TOKENCACHE_REASON_UNLOCK_PROMPT_TIMED_OUT = 6,
    /* The provider no longer knew the encrypted session (it restarted): retry. */
    TOKENCACHE_REASON_SECRET_SERVICE_SESSION_LOST = 7,
    /* No "default" collection, and none can be created here: the provider's password prompt
       could not be shown (no display). Use the file backend, or create the keyring where a
       display is (secret-tool, Seahorse). */
    TOKENCACHE_REASON_DEFAULT_COLLECTION_UNCREATABLE = 8,

    /* A library loaded at run time is missing (the *_MISSING codes); the hint says how to install it. */
    TOKENCACHE_REASON_LIBRARY_MISSING = 10,
    /* The encrypted file is older than one this machine has seen (FILE_ROLLED_BACK). */
    TOKENCACHE_REASON_FILE_ROLLED_BACK = 20,
    /* The TPM key source: no TPM 2.0 answered through the TCTI, or its storage hierarchy has a password. */
    TOKENCACHE_REASON_TPM_UNAVAILABLE = 21,
    /* The TPM is busy or in dictionary-attack lockout: try again later. */
    TOKENCACHE_REASON_TPM_LOCKED_OUT = 22,
    /* The cache key was sealed by another machine's TPM (a copied home directory). */
    TOKENCACHE_REASON_TPM_SEALED_ELSEWHERE = 23,

    /* Sign-in (tokencache_sign_in_*). */
    /* No browser: BROWSER not set, no desktop portal and no display. Use the device code sign-in. */
    TOKENCACHE_REASON_NO_DISPLAY = 30,
    /* No command in the BROWSER environment variable could open the page. */
    TOKENCACHE_REASON_BROWSER_COMMAND_FAILED = 31,
    /* xdg-open could not be started (xdg-utils not installed). */
    TOKENCACHE_REASON_XDG_OPEN_MISSING = 32,
    /* xdg-open opened no browser (no default browser). */
    TOKENCACHE_REASON_XDG_OPEN_FAILED = 33,
    /* The loopback redirect port could not be bound. */
    TOKENCACHE_REASON_REDIRECT_PORT_UNAVAILABLE = 34,
    /* No browser sign-in arrived within timeout_seconds. */
    TOKENCACHE_REASON_SIGN_IN_TIMED_OUT = 35,
    /* The device code sign-in did not finish within timeout_seconds. */
    TOKENCACHE_REASON_DEVICE_CODE_TIMED_OUT = 36,
    /* The authority has no device code flow: use tokencache_sign_in_browser. */
    TOKENCACHE_REASON_DEVICE_CODE_UNSUPPORTED = 37,
    /* The authority's OpenID discovery gave no usable token endpoint: check the authority. */
    TOKENCACHE_REASON_TOKEN_ENDPOINT_NOT_FOUND = 38,

    /* Silent sign-in (INTERACTION_REQUIRED, SERVER_ERROR, USER_MISMATCH). */
    /* No refresh token is cached for this account and app: sign the user in. */
    TOKENCACHE_REASON_NO_REFRESH_TOKEN = 40,
    /* The token endpoint refused the refresh tokens (invalid_grant, consent): sign the user in. */
    TOKENCACHE_REASON_REFRESH_TOKEN_REJECTED = 41,
    /* The token endpoint refused the app (client ID, authority): check the app registration. */
    TOKENCACHE_REASON_CLIENT_REJECTED = 42,
    /* The account's refresh tokens were issued by another cloud's host: nothing was sent. */
    TOKENCACHE_REASON_REFRESH_TOKEN_FROM_OTHER_HOST = 43,
    /* The token endpoint answered with another account's tokens; nothing was saved. */
    TOKENCACHE_REASON_TOKENS_OF_ANOTHER_ACCOUNT = 44,

    /* Token agent (TOKENCACHE_AGENT_SOCK; BACKEND_UNAVAILABLE). */
    /* The agent's socket could not be reached. */
    TOKENCACHE_REASON_AGENT_UNREACHABLE = 50,
    /* The agent closed the connection or answered outside its protocol. */
    TOKENCACHE_REASON_AGENT_PROTOCOL = 51,
    /* The socket may be another user's (its directory is open to others or theirs, or the
       socket or its listener runs as another uid); nothing was sent (since 0.6). */
    TOKENCACHE_REASON_AGENT_UNTRUSTED = 52,

    /* Secret portal, in a sandbox (PORTAL_CANCELLED, PORTAL_FAILED). */
    /* The request for the app's keyring secret was cancelled. */
    TOKENCACHE_REASON_PORTAL_REQUEST_CANCELLED = 60,
    /* The portal's Secret backend could not give the secret. */
    TOKENCACHE_REASON_PORTAL_REQUEST_FAILED = 61,
    /* The desktop portal or its Secret interface could not be called. */
    TOKENCACHE_REASON_PORTAL_UNREACHABLE = 62,
    /* The portal gave a secret of the wrong size. */
    TOKENCACHE_REASON_PORTAL_SECRET_SIZE = 63,
    /* The app's keyring file asks for more key-derivation rounds than accepted (INVALID_CACHE_DATA;
       since 0.6): a hostile file; nothing was derived or changed. */
    TOKENCACHE_REASON_KEY_DERIVATION_ROUNDS_OUT_OF_BOUNDS = 64,

    /* Native authentication (tokencache_native_*): NATIVE_AUTH_FAILED says which of these. */
    /* The username is not an email address the server accepts. */
    TOKENCACHE_REASON_INVALID_USERNAME = 70,
    /* The user must reset the password before signing in. */
    TOKENCACHE_REASON_PASSWORD_RESET_REQUIRED = 71,
    /* Password reset: the user signs in with email codes and has no password. */
    TOKENCACHE_REASON_USER_HAS_NO_PASSWORD = 72,
    /* The app registration does not allow native authentication: sign in with the browser. */
    TOKENCACHE_REASON_NATIVE_AUTH_NOT_ENABLED = 73,
    /* Password reset: the server reported that the reset failed or did not finish in time. */
    TOKENCACHE_REASON_PASSWORD_RESET_FAILED = 74,
    /* PASSWORD_POLICY: how the (new) password breaks the tenant's policy. */
    TOKENCACHE_REASON_PASSWORD_TOO_WEAK = 80,
    TOKENCACHE_REASON_PASSWORD_TOO_SHORT = 81,
    TOKENCACHE_REASON_PASSWORD_TOO_LONG = 82,
    TOKENCACHE_REASON_PASSWORD_RECENTLY_USED = 83,
    TOKENCACHE_REASON_PASSWORD_BANNED = 84,
    TOKENCACHE_REASON_PASSWORD_INVALID = 85,

    /* The process (OVERLOADED; since 0.6). */
    /* The library's blocking pool runs as many calls as its ceiling allows. */
    TOKENCACHE_REASON_THREAD_CEILING_REACHED = 90,

    /* Choosing the account and the token, one rule for every language (since 0.6). */
    /* NOT_FOUND: no account of the client matches. */
    TOKENCACHE_REASON_NO_ACCOUNT = 100,
    /* AMBIGUOUS_ACCOUNT: the client has several accounts and none was named. */
    TOKENCACHE_REASON_SEVERAL_ACCOUNTS = 101,
    /* AMBIGUOUS_ACCOUNT: the account has records at hosts of different clouds: pass the authority. */
    TOKENCACHE_REASON_ACCOUNT_IN_SEVERAL_CLOUDS = 102,
    /* AMBIGUOUS_ACCOUNT: no authority, and usable tokens are cached in several tenants. */
    TOKENCACHE_REASON_TOKENS_IN_SEVERAL_TENANTS = 103,
    /* NOT_FOUND: no usable cached access token, and none was redeemed (no authority given, or
       no refresh token). */
    TOKENCACHE_REASON_NO_USABLE_TOKEN = 104,
    /* NOT_FOUND: the account named exists, but the client is not signed in to it (or signed out
       already). */
    TOKENCACHE_REASON_CLIENT_NOT_SIGNED_IN = 105,

    /* The account photo, Microsoft Graph (tokencache_account_photo; since 0.6). */
    /* UNSUPPORTED_FLOW: B2C, generic OIDC or a host of no known cloud: no Graph photo. */
    TOKENCACHE_REASON_NO_GRAPH = 110,
    /* NETWORK: Graph did not answer. */
    TOKENCACHE_REASON_GRAPH_UNREACHABLE = 111,
    /* SERVER_ERROR: Graph answered neither 200 nor a photo's 404 (401/403: no User.Read consent). */
    TOKENCACHE_REASON_GRAPH_REFUSED = 112,
    /* SERVER_ERROR: the answer was not an image (image/...); nothing was cached. */
    TOKENCACHE_REASON_PHOTO_NOT_AN_IMAGE = 113,
    /* SERVER_ERROR: the photo was over 4 MiB; nothing was cached. */
    TOKENCACHE_REASON_PHOTO_TOO_LARGE = 114,

    /* The identity broker on the session bus (since 0.7). */
    /* BACKEND_UNAVAILABLE or NO_SESSION_BUS: no broker answers (none installed, or no bus). */
    TOKENCACHE_REASON_BROKER_UNAVAILABLE = 120,
    /* INTERACTION_REQUIRED, SERVER_ERROR, TIMED_OUT or INVALID_TOKEN_RESPONSE: the broker refused
       the request or answered outside its protocol. */
    TOKENCACHE_REASON_BROKER_REFUSED = 121
} tokencache_reason;

/* Opaque handles. */
typedef struct tokencache_store tokencache_store;
typedef struct tokencache_accounts tokencache_accounts;
typedef struct tokencache_token_info tokencache_token_info;
typedef struct tokencache_watch tokencache_watch;

/* Flags for tokencache_acquire_token_silent. */
#define TOKENCACHE_FORCE_REFRESH 0x1u

/* ---- Library ---- */

/* The library's version, "MAJOR.MINOR.PATCH". Static storage: do not free. Thread-safe. */
const char *tokencache_version(void);

/* The name of a status code ("TOKENCACHE_E_NOT_FOUND"), or "TOKENCACHE_E_UNKNOWN".
   Static storage: do not free. Thread-safe. */
const char *tokencache_status_name(int code);

/* The reason of the error a failed call filled in (a tokencache_reason), or
   TOKENCACHE_REASON_NONE: for NULL, a struct no call filled, or an error with no finer reason.
   Thread-safe. Since 0.5. */
int tokencache_error_reason(const tokencache_error *error);

/* The name of a reason ("TOKENCACHE_REASON_NO_DISPLAY"), or "TOKENCACHE_REASON_UNKNOWN".
   Static storage: do not free. Thread-safe. Since 0.5. */
const char *tokencache_reason_name(int reason);

/* ---- Stores ---- */

/* Opens the cache of a sharing group on the backend the policy selects.
   group: reverse-DNS group name, NULL for "com.microsoft.identity.universalstorage" (the group
   MSAL shares accounts in). Apps opening the same group share accounts and sign-in.
   On success *store is a handle to close with tokencache_store_close.
   On the encrypted file the key follows the cache: sealed to the TPM where cache.key.tpm exists
   (or TOKENCACHE_KEY_SOURCE=tpm; the TPM TOKENCACHE_TPM_TCTI names, else /dev/tpmrm0); a
   passphrase-protected group's from the session keyring (`tokencache unlock --file`), else
   INVALID_ARGUMENT when it is read (no prompt).
   Errors: INVALID_ARGUMENT (bad group or backend value), BACKEND_UNAVAILABLE, NO_SESSION_BUS,
   NO_SECRET_SERVICE, KEYRING_LOCKED, ... Thread-safe. */
int tokencache_store_open(const char *group, tokencache_backend backend,
                          tokencache_store **store, tokencache_error *error);

/* Closes a store. No other thread may be using it, and its watches must be stopped first.
   Objects obtained from the store remain valid. Accepts NULL. */
void tokencache_store_close(tokencache_store *store);

/* ---- Accounts ---- */

/* The accounts an app can use silently (client_id non-NULL: those with a refresh token of the
   app or its family that the app has not signed out of), or every account of the group
   (client_id NULL). With single sign-on stores set (tokencache_store_set_sso_stores), an app's
   list goes on with the accounts of those stores it could get a token for (a refresh token of
   the app or its family, at the host that issued it); a store in a locked keyring is
   KEYRING_LOCKED, never left out. On a store tokencache_acquire_token_silent answers through the
   token agent (TOKENCACHE_AGENT_SOCK), the agent's accounts instead. *accounts, possibly empty, is
   freed with tokencache_accounts_free. */
int tokencache_store_accounts(tokencache_store *store, const char *client_id,
                              tokencache_accounts **accounts, tokencache_error *error);

/* The number of accounts in a list; 0 for NULL. */
size_t tokencache_accounts_count(const tokencache_accounts *accounts);
/* Fields of account `index` (borrowed; NULL when index is out of range or accounts is NULL):
   home account ID ("<uid>.<utid>"), authority host ("login.microsoftonline.com"), username
   (may be ""), local account ID (object ID), home tenant ID (may be ""). */
const char *tokencache_accounts_home_account_id(const tokencache_accounts *accounts, size_t index);
const char *tokencache_accounts_environment(const tokencache_accounts *accounts, size_t index);
const char *tokencache_accounts_username(const tokencache_accounts *accounts, size_t index);
const char *tokencache_accounts_local_account_id(const tokencache_accounts *accounts, size_t index);
const char *tokencache_accounts_tenant_id(const tokencache_accounts *accounts, size_t index);
/* Frees a list and its strings. Accepts NULL. */
void tokencache_accounts_free(tokencache_accounts *accounts);

/* ---- Tokens ---- */

/* Looks up a cached access token, without any network request.
   account: username or home account ID. scopes: space-separated ("User.Read Mail.Read").
   authority: an authority URL to pick the tenant, or NULL for the account's home tenant (since
   0.6: else the only tenant with a token for the scopes, as tokencache_acquire_token_silent).
   On success *access_token is the token (free with tokencache_secret_free) and, when info is
   not NULL, *info describes it (free with tokencache_token_info_free).
   An account is a home account ID at one cloud (MSAL's alias sets for Microsoft hosts, else
   the exact host): the authority's, when given.
   Errors: NOT_FOUND when the account is unknown (reason NO_ACCOUNT) or no unexpired token grants
   the scopes (NO_USABLE_TOKEN); AMBIGUOUS_ACCOUNT when authority is NULL and the account is at
   hosts of different clouds (ACCOUNT_IN_SEVERAL_CLOUDS) or has tokens in several tenants.
   Reads this process's cache only, never the token agent (the agent may refresh). */
int tokencache_store_find_access_token(tokencache_store *store, const char *client_id,
                                       const char *account, const char *scopes,
                                       const char *authority, char **access_token,
                                       tokencache_token_info **info, tokencache_error *error);

/* Returns a token without user interaction: a cached access token when usable, otherwise one
   obtained by redeeming a refresh token of the app or its family at `authority` (e.g.
   "https://login.microsoftonline.com/common"), which is saved to the cache. Refreshes of
   one account are serialised across processes. A refresh token is only sent to the host that
   issued it. flags: 0 or TOKENCACHE_FORCE_REFRESH. Blocks for up to about 30 s per request.
   The account and token are chosen by the rule every front end follows (the CLI's `token`,
   Python, Swift apps): `account` (username or home account ID) or, when NULL, the client's
   only account; `authority` picks the cloud and tenant. When NULL (since 0.6): the home tenant's
   cached token, else that of the account's only tenant with one, refreshed when stale at that
   tenant on the account's own host (where its refresh token was issued; Entra accounts only).
   Errors: INTERACTION_REQUIRED (sign in interactively), NETWORK or SERVER_ERROR (retry later),
   NOT_FOUND (reason NO_ACCOUNT, or NO_USABLE_TOKEN), AMBIGUOUS_ACCOUNT
   (reason SEVERAL_ACCOUNTS, ACCOUNT_IN_SEVERAL_CLOUDS or TOKENS_IN_SEVERAL_TENANTS).
   Outputs as for tokencache_store_find_access_token.
   Token agent (docs/AGENT.md): when TOKENCACHE_AGENT_SOCK is set and the store chose no local
   cache (opened with a NULL group and TOKENCACHE_BACKEND_AUTO, no tokencache_store_set_sso_stores),
   the agent at that socket answers instead, looking up or refreshing on its side: this process's
   cache is neither read nor written, *info has is_from_cache 0, and an agent that cannot be
   reached (or speaks another protocol) is BACKEND_UNAVAILABLE; its other errors keep their codes
   (ACCESS_DENIED for its policy). A non-NULL group or another backend always uses the local cache. */
int tokencache_acquire_token_silent(tokencache_store *store, const char *client_id,
                                    const char *authority, const char *account,
                                    const char *scopes, unsigned flags, char **access_token,
                                    tokencache_token_info **info, tokencache_error *error);

/* ---- Continuous access evaluation (since TOKENCACHE_0.6) ---- */

/* Declares client capabilities, as MSAL's client_capabilities: "cp1" says the app handles claims
   challenges, so resources may apply continuous access evaluation to its tokens. capabilities:
   names separated by commas or spaces; NULL or "" turns it off. From then on every token request
   of the store (tokencache_acquire_token_silent, tokencache_acquire_token_with_claims, the
   tokencache_sign_in_* calls) sends them in the `claims` parameter, merged as MSAL merges them:
   {"access_token":{"xms_cc":{"values":["cp1"]}}}, with any claims of the call. With the token
   agent, the agent's refresh carries them. Errors: INVALID_ARGUMENT naming a malformed name
   (nothing changes). Not to be called while another thread uses the same store. */
int tokencache_store_set_client_capabilities(tokencache_store *store, const char *capabilities,
                                             tokencache_error *error);

/* ---- The identity broker (since TOKENCACHE_0.6) ---- */

/* When the store's silent requests ask the identity broker on the session bus
   (com.microsoft.identity.broker1: Microsoft's broker on an enrolled machine gives device-bound
   tokens) instead of the cache. `tokencache broker`, this cache's own provider, is never asked. */
#define TOKENCACHE_BROKER_NEVER 0u          /* the cache only (the default) */
#define TOKENCACHE_BROKER_WHEN_AVAILABLE 1u /* the broker when another broker answers, else the cache */
#define TOKENCACHE_BROKER_ALWAYS 2u         /* the broker only: without one, BACKEND_UNAVAILABLE
                                               (reason BROKER_UNAVAILABLE) */

/* Sets when tokencache_acquire_token_silent and tokencache_acquire_token_with_claims ask the
   broker: TOKENCACHE_BROKER_NEVER, _WHEN_AVAILABLE or _ALWAYS. The broker's account is chosen
   by the cache's rule; nothing it answers is saved here. Its refusal is INTERACTION_REQUIRED or
   SERVER_ERROR with reason BROKER_REFUSED. Errors: INVALID_ARGUMENT for another value (nothing
   changes). Not to be called while another thread uses the same store. */
int tokencache_store_set_broker(tokencache_store *store, unsigned use, tokencache_error *error);

/* The claims (decoded JSON) of a resource's claims challenge: its 401 answer's WWW-Authenticate
   value with Bearer error="insufficient_claims" and claims="<base64>". *claims is freed with
   tokencache_string_free. Errors: NOT_FOUND when the value has no such challenge,
   INVALID_ARGUMENT for NULL arguments. Thread-safe. */
int tokencache_claims_from_www_authenticate(const char *header, char **claims, tokencache_error *error);

/* A token that answers a claims challenge, as MSAL's acquire_token_silent with claims_challenge:
   as tokencache_acquire_token_silent with TOKENCACHE_FORCE_REFRESH, the cached access token
   skipped and the refresh carrying `claims` (decoded JSON, e.g. from
   tokencache_claims_from_www_authenticate; NULL or "": none) merged with the store's client
   capabilities. When the token endpoint refuses and asks for claims (INTERACTION_REQUIRED, e.g.
   AADSTS50076: multi-factor authentication), *required_claims (when required_claims is not
   NULL) is set to them, to pass to an interactive sign-in (free with tokencache_string_free);
   otherwise it is NULL. Errors: as tokencache_acquire_token_silent; INVALID_ARGUMENT when claims
   is not a JSON object and capabilities are set; NOT_FOUND (NO_USABLE_TOKEN) when there is no
   authority to refresh at (the refused token is never returned). With the token agent, the
   agent refreshes with the claims. */
int tokencache_acquire_token_with_claims(tokencache_store *store, const char *client_id,
                                         const char *authority, const char *account,
                                         const char *scopes, const char *claims, char **access_token,
                                         tokencache_token_info **info, char **required_claims,
                                         tokencache_error *error);

/* Flags for tokencache_account_photo. */
#define TOKENCACHE_PHOTO_REFRESH 0x1u

/* The account's photo from Microsoft Graph (/me/photo/$value), or none: MSAL Quick
   Authentication's base64Photo. The account is chosen as by tokencache_acquire_token_silent
   (`account` or, when NULL, the client's only one); `authority` (required) is where the silent
   User.Read token comes from. Graph is the account's cloud's (graph.microsoft.com, .us, China's),
   or TOKENCACHE_GRAPH_ENDPOINT (https, or http on loopback). The answer is cached with the
   account in the group (protected as its tokens), used for a day unless flags has
   TOKENCACHE_PHOTO_REFRESH, and removed with the account. Blocks for up to about 30 s per request.
   On success *data is the image (free with tokencache_photo_free), *length its size (at most
   4 MiB) and *content_type its MIME type, "image/..." (free with tokencache_string_free); when
   the account has no photo (Graph's 404) the call succeeds with *data and *content_type NULL
   and *length 0.
   Errors: UNSUPPORTED_FLOW (reason NO_GRAPH), NETWORK (GRAPH_UNREACHABLE), SERVER_ERROR
   (GRAPH_REFUSED, PHOTO_NOT_AN_IMAGE, PHOTO_TOO_LARGE), NOT_FOUND (NO_ACCOUNT),
   AMBIGUOUS_ACCOUNT, INTERACTION_REQUIRED (no User.Read token). A cached photo is kept on every
   error. Reads and writes this process's cache (never the token agent). Since TOKENCACHE_0.6. */
int tokencache_account_photo(tokencache_store *store, const char *client_id, const char *authority,
                             const char *account, unsigned flags, unsigned char **data, size_t *length,
                             char **content_type, tokencache_error *error);

/* Frees a photo from tokencache_account_photo; NULL is ignored. Since TOKENCACHE_0.6. */
void tokencache_photo_free(unsigned char *data);

/* Single sign-on with other tools' MSAL caches (Azure CLI's and others), off by default.
   names: the stores tokencache_acquire_token_silent may also use, as `tokencache stores` names
   them (for example "azure-cli"), separated by commas or spaces; NULL or "" turns it off. Their
   paths are resolved now, from HOME, XDG_DATA_HOME and AZURE_CONFIG_DIR. With stores set, an app's
   tokencache_store_accounts lists their accounts too, an account named to
   tokencache_acquire_token_silent that the group does not hold is looked up in them, and when the group has no refresh token for it that the authority may see, one from a
   store is redeemed (only at the host that issued it); the token is saved in the group and the
   store gets back the rotated refresh token, under its owner's lock.
   Errors: INVALID_ARGUMENT naming an unknown store (nothing changes). Not to be called while
   another thread uses the same store. Since TOKENCACHE_0.3. */
int tokencache_store_set_sso_stores(tokencache_store *store, const char *names, tokencache_error *error);

/* Parses and stores a token endpoint response (the JSON body of a successful response to an
   authorization-code, device-code or refresh-token request): access, refresh and ID tokens,
   account and app metadata, as MSAL does, so every app of the group can use the sign-in.
   response_json: `length` bytes of UTF-8 JSON (a secret: the library does not keep it; wipe
   it yourself). scopes: space-separated, used when the response lists none.
   *info (optional, may be NULL) describes the saved access token.
   Errors: INVALID_TOKEN_RESPONSE (nothing saved), INVALID_ARGUMENT. */
int tokencache_store_save_response(tokencache_store *store, const char *client_id,
                                   const char *authority, const char *scopes,
                                   const char *response_json, size_t length,
                                   tokencache_token_info **info, tokencache_error *error);

/* Wipes a secret returned by this library (every byte up to its terminating NUL set to zero,
   in a way the compiler cannot optimise away), then frees it. Accepts NULL. Thread-safe. */
void tokencache_secret_free(char *secret);

/* Token info: what a caller needs besides the token itself. Borrowed strings. */
/* Expiry, in seconds since the Unix epoch. */
int64_t tokencache_token_info_expires_on(const tokencache_token_info *info);
/* The authentication scheme ("Bearer"). */
const char *tokencache_token_info_scheme(const tokencache_token_info *info);
/* The scopes the token grants, space-separated. */
const char *tokencache_token_info_scopes(const tokencache_token_info *info);
/* The tenant that issued the token; "" when unknown. */
const char *tokencache_token_info_tenant_id(const tokencache_token_info *info);
/* The account's home account ID and username; "" when the cache has no account record. */
const char *tokencache_token_info_home_account_id(const tokencache_token_info *info);
const char *tokencache_token_info_username(const tokencache_token_info *info);
/* 1 when the token came from the cache, 0 when from the token endpoint just now. */
int tokencache_token_info_is_from_cache(const tokencache_token_info *info);
/* Frees token info. Accepts NULL. */
void tokencache_token_info_free(tokencache_token_info *info);

/* ---- Signing in (since 0.2) ---- */

/* Called by tokencache_sign_in_device_code once the authority has issued a code (not at all
   when the sign-in fails before that), with what to show the user: the code to enter at
   verification_uri ("https://microsoft.com/devicelogin"), and the authority's own instructions
   saying both (control characters removed). All three are borrowed for the call only. It runs
   on the thread that called tokencache_sign_in_device_code, before that call returns, while the
   library polls the authority in the background; it may call this library. It cannot stop the
   sign-in: pass a timeout_seconds for that. */
typedef void (*tokencache_device_code_callback)(const char *user_code, const char *verification_uri,
                                                const char *message, void *user_data);

/* Signs a user in with a code entered on another device (OAuth 2.0 device authorization grant,
   RFC 8628): for SSH sessions, containers and machines without a browser. Asks the authority
   (e.g. "https://login.microsoftonline.com/organizations") for a code, hands it to on_code
   (required), then polls the token endpoint at the authority's interval until the user has
   finished, and saves the result to the group's cache as tokencache_store_save_response does:
   every app of the group then lists the account. scopes: space-separated; openid, profile and
   offline_access are added. timeout_seconds: 0 waits until the code expires (the authority
   says when, typically 15 minutes); otherwise the sign-in is cancelled after that many seconds
   and TIMED_OUT returned (once a token request in flight has ended: up to about 30 s more).
   Blocks until then. Thread-safe (one sign-in per call).
   On success *access_token is the new token (free with tokencache_secret_free) and, when info
   is not NULL, *info describes it (is_from_cache 0; free with tokencache_token_info_free).
   Errors: ACCESS_DENIED (the user declined), TIMED_OUT (the code expired, or timeout_seconds
   passed), UNSUPPORTED_FLOW (no device code endpoint), AUTHORIZATION_FAILED, NETWORK,
   SERVER_ERROR, INVALID_ARGUMENT, and the store's errors when saving. */
int tokencache_sign_in_device_code(tokencache_store *store, const char *client_id,
                                   const char *authority, const char *scopes,
                                   tokencache_device_code_callback on_code, void *user_data,
                                   unsigned timeout_seconds, char **access_token,
                                   tokencache_token_info **info, tokencache_error *error);

/* Signs a user in with the system browser: the authorization code flow with PKCE (S256) and a
   loopback redirect to http://localhost:<free port> (RFC 8252), which must be registered for
   the app. The browser is opened through the desktop portal (org.freedesktop.portal.OpenURI),
   else xdg-open when there is a display; the result is saved as for
   tokencache_sign_in_device_code. login_hint (optional, NULL for none): the username to
   prefill. timeout_seconds: how long the user has to finish signing in (0: 300).
   Blocks until the redirect arrives or the timeout passes. Thread-safe.
   Outputs as for tokencache_sign_in_device_code.
   Errors: BROWSER_UNAVAILABLE (no portal and no display or xdg-open: use the device code
   sign-in; returned at once, without waiting for the timeout), CANCELLED, ACCESS_DENIED,
   AUTHORIZATION_FAILED, STATE_MISMATCH, PORT_UNAVAILABLE, TIMED_OUT, UNSUPPORTED_FLOW, NETWORK,
   SERVER_ERROR, INVALID_ARGUMENT, and the store's errors when saving. */
int tokencache_sign_in_browser(tokencache_store *store, const char *client_id,
                               const char *authority, const char *scopes,
                               const char *login_hint, unsigned timeout_seconds,
                               char **access_token, tokencache_token_info **info,
                               tokencache_error *error);

/* Native authentication with Microsoft Entra External ID (since 0.4): the app asks for the
   email code and passwords itself. authority: the CIAM authority (https://{tenant}.ciamlogin.com,
   with or without a tenant path, or a custom domain). Each function runs the whole flow and
   blocks until it ends; every network step is bounded (about 30 s). Thread-safe (one flow per
   call). What the flow needs from the user is asked through `prompt`, always on the calling
   thread (it may call this library): it writes a NUL-terminated answer of at most answer_size
   bytes (including the NUL) into `answer` and returns 0, or returns non-zero to cancel
   (TOKENCACHE_E_CANCELLED). The library wipes `answer` after use; nothing typed is logged.
   On success the user is signed in and the tokens saved in the store's group as MSAL saves
   them (the app keeps one native account: a new sign-in signs it out of the previous one);
   *access_token and *info as for tokencache_sign_in_device_code. */
typedef enum tokencache_native_prompt {
    /* The code emailed to `detail` (a masked address). After a wrong code it is asked again,
       at most three times in all. */
    TOKENCACHE_NATIVE_CODE = 1,
    /* The password of the user `detail`. */
    TOKENCACHE_NATIVE_PASSWORD = 2,
    /* Sign-up: a password for the new account `detail` (the user flow requires one). */
    TOKENCACHE_NATIVE_NEW_PASSWORD = 3,
    /* Sign-up: the value of the attribute named `detail`, which the user flow requires. */
    TOKENCACHE_NATIVE_ATTRIBUTE = 4
} tokencache_native_prompt;

typedef int (*tokencache_native_prompt_callback)(tokencache_native_prompt what, const char *detail,
                                                 char *answer, size_t answer_size, void *user_data);

/* Signs a user in: an email code or a password (password NULL: asked through the prompt if the
   user has one). Errors: BROWSER_REQUIRED, USER_NOT_FOUND, INVALID_CREDENTIALS, INVALID_CODE,
   EXPIRED, CANCELLED, NATIVE_AUTH_FAILED, NETWORK, SERVER_ERROR, INVALID_ARGUMENT, and the
   store's errors when saving. */
int tokencache_native_sign_in(tokencache_store *store, const char *client_id, const char *authority,
                              const char *scopes, const char *username, const char *password,
                              tokencache_native_prompt_callback prompt, void *user_data,
                              char **access_token, tokencache_token_info **info,
                              tokencache_error *error);

/* Signs a new user up, then in. password NULL: an email-code account (challenge types oob and
   redirect only). attributes_json: NULL or a JSON object of string values ({"displayName":
   "Ada"}); attributes the user flow requires beyond these are asked through the prompt.
   Errors: those of tokencache_native_sign_in, USER_ALREADY_EXISTS, PASSWORD_POLICY,
   ATTRIBUTE_VALIDATION. */
int tokencache_native_sign_up(tokencache_store *store, const char *client_id, const char *authority,
                              const char *scopes, const char *username, const char *password,
                              const char *attributes_json, tokencache_native_prompt_callback prompt,
                              void *user_data, char **access_token, tokencache_token_info **info,
                              tokencache_error *error);

/* Resets a user's password (the code is asked through the prompt), waits until the reset
   completes, then signs the user in. Errors: those of tokencache_native_sign_in,
   PASSWORD_POLICY. */
int tokencache_native_reset_password(tokencache_store *store, const char *client_id,
                                     const char *authority, const char *scopes,
                                     const char *username, const char *new_password,
                                     tokencache_native_prompt_callback prompt, void *user_data,
                                     char **access_token, tokencache_token_info **info,
                                     tokencache_error *error);

/* ---- Signing out ---- */

/* Signs one app out of an account, as MSAL's remove(account): the app's own tokens go and it no
   longer lists the account; other apps of the group keep it and their single sign-on.
   The same rule as `tokencache logout`: the app must be signed in to the account.
   Errors: NOT_FOUND (reason NO_ACCOUNT for an unknown account, CLIENT_NOT_SIGNED_IN when the app
   is not signed in to it or signed out already), AMBIGUOUS_ACCOUNT (reason SEVERAL_ACCOUNTS, or
   ACCOUNT_IN_SEVERAL_CLOUDS at hosts of two clouds: use `tokencache logout --authority URL`). */
int tokencache_store_sign_out(tokencache_store *store, const char *client_id,
                              const char *account, tokencache_error *error);

/* Removes an account and every token of it, for every app of the group. *removed (optional)
   is the number of cache entries removed. Errors: NOT_FOUND (unknown account),
   AMBIGUOUS_ACCOUNT (at hosts of two clouds: use `tokencache remove --authority URL`). */
int tokencache_store_remove_account(tokencache_store *store, const char *account,
                                    size_t *removed, tokencache_error *error);

/* ---- Watching ---- */

/* Called with the accounts an app can use, first as they are and then each time they change
   (another app or process signed in or out). `accounts` is borrowed for the call only; on a read
   failure (locked keyring) accounts is NULL and `error` says why (the watch goes on). Runs on a
   thread of the library's, one call at a time; it may call this library, but not stop its own
   watch. */
typedef void (*tokencache_accounts_changed_callback)(const tokencache_accounts *accounts,
                                                     const tokencache_error *error,
                                                     void *user_data);

/* Starts watching the accounts an app (client_id) can use, checking the group's revision every
   interval_ms milliseconds (0: 1000). *watch is stopped and freed with tokencache_watch_stop. */
int tokencache_store_watch_accounts(tokencache_store *store, const char *client_id,
                                    unsigned interval_ms,
                                    tokencache_accounts_changed_callback callback,
                                    void *user_data, tokencache_watch **watch,
                                    tokencache_error *error);

/* Stops a watch: returns once the callback is not running and will not run again. Not from
   inside the watch's own callback. Accepts NULL. */
void tokencache_watch_stop(tokencache_watch *watch);

/* ---- Diagnosis ---- */

/* What `tokencache doctor` reports, as text: the backend the policy selects for the group and
   why, and every check (session bus, Secret Service provider, libsecret, the encrypted file,
   OpenSSL, libcurl). Changes nothing. *report is freed with tokencache_string_free. Returns OK
   even when the backend cannot work (the report says so and gives the fix); *usable (optional)
   is 1 when it can. */
int tokencache_diagnose(const char *group, tokencache_backend backend, char **report,
                        int *usable, tokencache_error *error);

/* Frees a non-secret string returned by this library. Accepts NULL. */
void tokencache_string_free(char *text);

#ifdef __cplusplus
}
#endif

#endif /* TOKENCACHE_H */
