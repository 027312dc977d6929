/* Native authentication through the C interface (tokencache_native_*), against the loopback
   stand-in of the native-auth API (Tests/TokenCacheTestIdentityProvider/Fixtures/native_auth.py). Run by
   Tests/TokenCacheTests/NativeAuth/NativeAuthCAPITests.swift:
     test_native_auth MODE GROUP AUTHORITY MAILBOX EMAIL [PASSWORD]
   MODE: signin (a wrong code first, then the mailed one; or the password prompt), signup (the
   new password and required attributes through the prompt), reset (PASSWORD is the new one).
   The code prompt reads the last line of MAILBOX/EMAIL, where the stand-in "mails" codes.
   Prints "ok USERNAME PROMPTS" or the status name; exit 0 only on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokencache.h"

typedef struct {
    const char *mailbox, *email, *password;
    int codes_asked, passwords_asked, attributes_asked;
} answers;

static int latest_code(const answers *a, char *out, size_t size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", a->mailbox, a->email);
    FILE *file = fopen(path, "r");
    if (!file) return 1;
    char line[64] = "";
    while (fgets(line, sizeof line, file)) {}
    fclose(file);
    line[strcspn(line, "\n")] = 0;
    snprintf(out, size, "%s", line);
    return line[0] == 0;
}

static int prompt(tokencache_native_prompt what, const char *detail, char *answer, size_t size, void *user_data) {
    answers *a = user_data;
    (void)detail;
    switch (what) {
    case TOKENCACHE_NATIVE_CODE:
        if (a->codes_asked++ == 0) { snprintf(answer, size, "73000001"); return 0; }  /* wrong first */
        return latest_code(a, answer, size);
    case TOKENCACHE_NATIVE_PASSWORD:
    case TOKENCACHE_NATIVE_NEW_PASSWORD:
        a->passwords_asked++;
        snprintf(answer, size, "%s", a->password ? a->password : "");
        return a->password == NULL;
    case TOKENCACHE_NATIVE_ATTRIBUTE:
        a->attributes_asked++;
        snprintf(answer, size, "%s", strcmp(detail, "extension_age") == 0 ? "42" : "C User");
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: test_native_auth MODE GROUP AUTHORITY MAILBOX EMAIL [PASSWORD]\n"); return 2; }
    const char *mode = argv[1], *group = argv[2], *authority = argv[3];
    answers a = { argv[4], argv[5], argc > 6 ? argv[6] : NULL, 0, 0, 0 };
    const char *client = "aaaaaaaa-0000-0000-0000-000000000001";
    tokencache_error error;
    tokencache_store *store = NULL;
    if (tokencache_store_open(group, TOKENCACHE_BACKEND_FILE, &store, &error) != TOKENCACHE_OK) {
        printf("%s %s\n", tokencache_status_name(error.code), error.message);
        return 1;
    }
    char *token = NULL;
    tokencache_token_info *info = NULL;
    int status;
    if (strcmp(mode, "signin") == 0) {
        status = tokencache_native_sign_in(store, client, authority, "User.Read", a.email, NULL, prompt, &a, &token, &info, &error);
    } else if (strcmp(mode, "signup") == 0) {
        status = tokencache_native_sign_up(store, client, authority, "User.Read", a.email, NULL, "{\"displayName\": \"C User\"}",
                                           prompt, &a, &token, &info, &error);
    } else if (strcmp(mode, "reset") == 0) {
        status = tokencache_native_reset_password(store, client, authority, "User.Read", a.email, a.password, prompt, &a,
                                                  &token, &info, &error);
    } else {
        status = tokencache_native_sign_in(store, client, authority, "User.Read", a.email, NULL, NULL, NULL, &token, &info, &error);
    }
    if (status != TOKENCACHE_OK) {
        printf("%s %s %s\n", tokencache_status_name(status), tokencache_reason_name(tokencache_error_reason(&error)), error.message);
        tokencache_store_close(store);
        return 1;
    }
    printf("ok %s codes=%d passwords=%d attributes=%d\n", tokencache_token_info_username(info), a.codes_asked, a.passwords_asked,
           a.attributes_asked);
    tokencache_secret_free(token);
    tokencache_token_info_free(info);
    tokencache_store_close(store);
    return 0;
}
