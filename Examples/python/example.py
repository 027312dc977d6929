#!/usr/bin/env python3
"""Lists the accounts in the MSAL sharing group of your keyring (or encrypted file) and, given an
app's client ID and scopes, whether each has a usable cached access token for it.

    pip install ./python        # the binding; libtokencache.so.0 from the Debian package
    python3 example.py [CLIENT_ID SCOPES]
"""
import sys

import tokencache


def main() -> int:
    client_id, scopes = (sys.argv[1], sys.argv[2]) if len(sys.argv) == 3 else (None, None)
    print(f"libtokencache {tokencache.library_version()}")
    try:
        with tokencache.Store.open() as store:
            accounts = store.accounts(client_id)
            print(f"{len(accounts)} account(s)" + (f" for {client_id}" if client_id else ""))
            for account in accounts:
                print(f"  {account.username} ({account.home_account_id})")
                if client_id:
                    token = store.find_access_token(client_id, account.home_account_id, scopes)
                    # Use token.authorization_header; never print or log the token itself.
                    print(f"    access token: {token.scheme}, expires {token.expires_on.isoformat()}" if token
                          else "    no usable access token")
    except tokencache.TokenCacheError as error:
        print(f"Token cache: {error.message}\n{error.hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
