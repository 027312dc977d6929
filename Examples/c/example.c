/*
 * Lists the accounts in the MSAL sharing group of your keyring (or encrypted file) and, given an
 * app's client ID and scopes, whether each account has a usable cached access token for it.
 *
 *   cc -o example example.c $(pkg-config --cflags --libs tokencache)
 *   ./example [CLIENT_ID SCOPES]
 */
#include <tokencache.h>

#include <stdio.h>
#include <time.h>

int main(int argc, char **argv) {
    const char *client_id = argc == 3 ? argv[1] : NULL;
    const char *scopes = argc == 3 ? argv[2] : NULL;
    tokencache_error error;
    tokencache_store *store = NULL;

    printf("libtokencache %s\n", tokencache_version());
    if (tokencache_store_open(NULL, TOKENCACHE_BACKEND_AUTO, &store, &error) != TOKENCACHE_OK) {
        fprintf(stderr, "Cannot open the token cache: %s\n%s\n", error.message, error.hint);
        return 1;
    }
    tokencache_accounts *accounts = NULL;
    if (tokencache_store_accounts(store, client_id, &accounts, &error) != TOKENCACHE_OK) {
        fprintf(stderr, "Cannot list accounts: %s\n%s\n", error.message, error.hint);
        tokencache_store_close(store);
        return 1;
    }
    size_t count = tokencache_accounts_count(accounts);
    printf("%zu account(s)%s%s\n", count, client_id ? " for " : "", client_id ? client_id : "");
    for (size_t i = 0; i < count; i++) {
        const char *username = tokencache_accounts_username(accounts, i);
        printf("  %s (%s)\n", username, tokencache_accounts_home_account_id(accounts, i));
        if (client_id == NULL) continue;
        char *token = NULL;
        tokencache_token_info *info = NULL;
        int status = tokencache_store_find_access_token(store, client_id, tokencache_accounts_home_account_id(accounts, i),
                                                        scopes, NULL, &token, &info, &error);
        if (status == TOKENCACHE_OK) {
            /* Use the token (an Authorization header), never print or log it. */
            printf("    access token: %s, expires in %lld s\n", tokencache_token_info_scheme(info),
                   (long long)(tokencache_token_info_expires_on(info) - time(NULL)));
        } else {
            printf("    no usable access token (%s)\n", tokencache_status_name(status));
        }
        tokencache_secret_free(token);
        tokencache_token_info_free(info);
    }
    tokencache_accounts_free(accounts);
    tokencache_store_close(store);
    return 0;
}
