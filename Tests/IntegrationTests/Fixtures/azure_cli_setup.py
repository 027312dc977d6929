"""Points the real Azure CLI (from PyPI, .venv-azure-cli) at the loopback fake identity provider,
offline, for the tests that check what Azure CLI reads from a cache this project changed.

Run with Azure CLI's own venv python (it reads the installed versions):
    .venv-azure-cli/bin/python azure_cli_setup.py CONFIG_DIR --authority-host https://127.0.0.1:PORT \
        --tenant TENANT --username USER

Writes into CONFIG_DIR (AZURE_CONFIG_DIR):
  config             a custom cloud "FakeIdpCloud" made active; telemetry, survey and auto-upgrade
                     off; core.instance_discovery = false (else MSAL asks login.microsoftonline.com
                     about the unknown host)
  clouds.config      the cloud: endpoint_active_directory = the fake provider's https address
  versionCheck.json  a fresh version check, which Azure CLI would otherwise make against
                     azcliprod.blob.core.windows.net at start-up (no setting turns it off)
  azureProfile.json  one subscription of USER in TENANT on that cloud, so that
                     `az account get-access-token` asks MSAL for that account's token

Then the only request Azure CLI makes for a cached token is the tenant's OpenID configuration
(cached by MSAL in msal_http_cache.bin); a token request reaches the provider only to refresh.
Azure CLI asks for the scope "<resource>/.default", the resource being
endpoint_active_directory_resource_id (https://management.core.windows.net/).
"""
import argparse
import datetime
import importlib.metadata
import json
import os

CLOUD = "FakeIdpCloud"
RESOURCE = "https://management.core.windows.net/"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config_dir")
    parser.add_argument("--authority-host", required=True)
    parser.add_argument("--tenant", required=True, help="lower case: Azure CLI lower-cases the authority")
    parser.add_argument("--username", required=True)
    args = parser.parse_args()
    os.makedirs(args.config_dir, exist_ok=True)
    with open(os.path.join(args.config_dir, "config"), "w") as config:
        config.write("[cloud]\nname = %s\n\n[core]\ncollect_telemetry = false\nsurvey_message = false\n"
                     "instance_discovery = false\nno_color = true\nonly_show_errors = true\nfirst_run = yes\n\n"
                     "[auto-upgrade]\nenable = false\n\n[logging]\nenable_log_file = false\n" % CLOUD)
    with open(os.path.join(args.config_dir, "clouds.config"), "w") as clouds:
        clouds.write("[%s]\nprofile = latest\nendpoint_active_directory = %s\nendpoint_active_directory_resource_id = %s\n"
                     "endpoint_active_directory_graph_resource_id = https://graph.windows.net/\n"
                     "endpoint_resource_manager = %s/arm/\nendpoint_management = %s\n"
                     % (CLOUD, args.authority_host, RESOURCE, args.authority_host, RESOURCE))
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")
    local = lambda package: {"local": importlib.metadata.version(package)}
    with open(os.path.join(args.config_dir, "versionCheck.json"), "w") as check:
        json.dump({"versions": {"azure-cli": local("azure-cli"), "core": local("azure-cli-core"),
                                "telemetry": local("azure-cli-telemetry")}, "update_time": now, "check_time": now}, check)
    with open(os.path.join(args.config_dir, "azureProfile.json"), "w") as profile:
        json.dump({"installationId": "00000000-0000-0000-0000-0000000000aa", "subscriptions": [{
            "id": "11111111-2222-3333-4444-555555555555", "name": "Offline Test Subscription", "state": "Enabled",
            "user": {"name": args.username, "type": "user"}, "isDefault": True, "tenantId": args.tenant,
            "homeTenantId": args.tenant, "environmentName": CLOUD, "managedByTenants": []}]}, profile)
    print(json.dumps({"config_dir": args.config_dir, "cloud": CLOUD, "scope": RESOURCE + "/.default"}))


if __name__ == "__main__":
    main()
