"""Writes a GNOME Keyring keyring file holding an MSAL JSON cache as swift-tokencache stores it.

Why: storing one item makes gnome-keyring rewrite its whole keyring file, so importing 1,000
accounts x 3 clients (10,003 items) through D-Bus takes about half an hour. The daemon loads
keyring files when it starts, so the benchmark writes the file directly instead, in GNOME
Keyring's textual (unencrypted) format, with exactly the attributes, labels and secrets the
Secret Service backend writes (docs/SecretService.md, item schema version 1). bench.sh then
makes it the `default` collection and gives it a password (one rewrite, in the encrypted format),
so every later store pays what it pays on a real login keyring. bench.sh checks the result
against a keyring filled by `tokencache import` at 10 accounts.

    seed_keyring.py OUT.keyring [--label NAME] CACHE.json=GROUP [CACHE.json=GROUP ...]
"""
import argparse
import json

SCHEMA = "org.swift-tokencache.Entry"
ATTRIBUTES = ["home_account_id", "environment", "client_id", "realm", "family_id", "username"]


def escape(value):
    """GKeyFile string escaping (g_key_file_get_string undoes it)."""
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    if out.startswith(" "):
        out = "\\s" + out[1:]
    return out


def label(kind, fields, usernames):
    """The label SecretItemSchema.label(of:username:) gives: the username where the group knows it."""
    client = fields.get("client_id", "")
    home = usernames.get(fields.get("home_account_id", ""), fields.get("home_account_id", ""))
    if kind == "AccessToken":
        return "Access token · %s · %s · %s" % (home, client, fields.get("target", ""))
    if kind == "RefreshToken":
        family = " · family %s" % fields["family_id"] if "family_id" in fields else ""
        return "Refresh token · %s · %s%s" % (home, client, family)
    if kind == "IdToken":
        return "ID token · %s · %s" % (home, client)
    if kind == "Account":
        return "Account · %s · %s" % (fields.get("username", ""), fields.get("realm", ""))
    if kind == "AppMetadata":
        return "App metadata · %s" % client
    return "Sign-in state · %s · %s · %s" % (home, client, fields.get("sign_in_state", ""))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--label", default="Benchmark")
    parser.add_argument("groups", nargs="+", metavar="CACHE.json=GROUP")
    args = parser.parse_args()
    lines = ["[keyring]", "display-name=" + escape(args.label), "ctime=0", "mtime=0",
             "lock-on-idle=false", "lock-after=false", ""]
    identifier = 0
    for pair in args.groups:
        path, group = pair.rsplit("=", 1)
        with open(path) as handle:
            cache = json.load(handle)
        identifier = add_group(lines, cache, group, identifier)
    with open(args.out, "w") as handle:
        handle.write("\n".join(lines))
    print(identifier)


def add_group(lines, cache, group, identifier):
    usernames = {fields["home_account_id"]: fields["username"] for fields in cache.get("Account", {}).values()
                 if fields.get("home_account_id") and fields.get("username")}
    for kind in ["AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata", "AccountMetadata"]:
        for key, fields in sorted(cache.get(kind, {}).items()):
            identifier += 1
            secret = json.dumps({kind: {key: fields}}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            attributes = {"xdg:schema": SCHEMA, "schema_version": "1", "group": group, "kind": kind, "key": key}
            for name in ATTRIBUTES:
                value = fields.get(name)
                if isinstance(value, str) and value:
                    attributes[name] = value.lower() if name == "username" else value
            lines += ["[%d]" % identifier, "item-type=0", "display-name=" + escape(label(kind, fields, usernames)),
                      "secret=" + escape(secret), "mtime=0", "ctime=0", ""]
            for index, (name, value) in enumerate(sorted(attributes.items())):
                lines += ["[%d:attribute%d]" % (identifier, index), "name=" + escape(name), "type=string",
                          "value=" + escape(value), ""]
    return identifier


if __name__ == "__main__":
    main()
