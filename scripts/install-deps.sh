#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian machine with Swift:
# the C libraries (GLib headers; libgcrypt (through libsecret-1-0, whose secret-tool and GObject
# bindings the tests use), libcurl and OpenSSL's libcrypto 3 at run time only, as they are loaded
# with dlopen; libcurl4 depends on libssl3, which holds libcrypto), gnome-keyring and
# D-Bus for the isolated test keyring, KeePassXC and kwalletd5 (with QCA's OpenSSL plugin, which its
# Secret Service sessions need) for the other Secret Service providers (scripts/with-test-keepassxc.sh,
# scripts/with-test-kwallet.sh), headless Chromium for the browser sign-in tests, a C compiler with
# AddressSanitizer (gcc) for the C interface's tests, a Python venv with MSAL Python (and its broker
# runtime) for the interop tests, and what the identity broker's end-to-end harness needs.
# Safe to run again: it only installs what is missing. It says what it installs before it does,
# and starts no system service (scripts/lib/apt.sh).
#   scripts/install-deps.sh            what building and the whole test suite need
#   scripts/install-deps.sh --demo     only what scripts/demo.sh needs
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/apt.sh  # apt_get

# install_missing [--no-install-recommends] PACKAGE...: installs those not installed yet.
install_missing() {
    local options=() missing=() package
    if [ "$1" = --no-install-recommends ]; then options=("$1"); shift; fi
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$package")
    done
    ((${#missing[@]})) || return 0
    echo "Installing: ${missing[*]} ${options[*]:+(${options[*]})}" >&2
    apt_get update -qq
    apt_get install -y -qq "${options[@]}" "${missing[@]}" >/dev/null
}

# The demo (scripts/demo.sh --demo) needs only what builds and runs the CLI and the demo: GLib's
# headers (the D-Bus layer), pkg-config to find them, libcurl at run time (loaded with dlopen; it
# brings OpenSSL's libcrypto); the Secret Service is used only where a desktop session offers one.
demo_packages=(libglib2.0-dev pkg-config libcurl4)
if [ "${1:-}" = --demo ]; then
    install_missing "${demo_packages[@]}"
    exit 0
fi

install_missing "${demo_packages[@]}" libsecret-1-0 gnome-keyring dbus libsecret-tools gcc \
    python3 python3-venv python3-gi gir1.2-secret-1 \
    keepassxc libkf5wallet-bin libqca-qt5-2-plugins \
    openssh-client openssh-server `# the agent's forwarding tests (#38): ssh -R to a private sshd` \
    bubblewrap `# the sandbox tests (#39): a /.flatpak-info for secret-tool and tokencache` \
    xdg-desktop-portal `# the real Secret portal (gnome-keyring is its backend)` \
    xdg-dbus-proxy `# the sandbox's filtered bus, as Flatpak's (portal only)` \
    libglib2.0-bin `# gdbus: the keeper's forwarding tests' broker-enabled app (#62)`

# The developer tools' tests (#61): the real git and kubectl. Debian's kubectl (kubernetes-client)
# only where no kubectl is installed: the Google Cloud SDK's `kubectl` package owns /usr/bin/kubectl
# on some machines (this one), and the two packages conflict. Debian 12's kubernetes-client is
# 1.20, older than client.authentication.k8s.io/v1 (1.22): the v1 case needs a newer kubectl.
install_missing git
command -v kubectl >/dev/null || install_missing kubernetes-client

# JSON on the command line: the symbol graphs (scripts/count-public-api.sh) and the package's
# manifest (scripts/check-module-graph.sh).
install_missing jq

# The TPM key source (#49): tpm2-tss at run time (dlopen), a software TPM per test (swtpm) and
# tpm2-tools to flush what killed writers left in it; keyctl for the session key.
install_missing libtss2-esys-3.0.2-0 libtss2-tctildr0 libtss2-tcti-swtpm0 swtpm swtpm-tools tpm2-tools keyutils

# The token keeper's tests (#62): a caller under a tracer (strace) is not identified as its program.
install_missing strace
# ... and the hardened unit and socket (packaging/systemd) are checked with systemd-analyze verify
# (Debian's systemd package holds it; installing it starts nothing here).
install_missing systemd

# The desktop sample (#48, #60) and its test: GTK 4 and libadwaita, Xvfb, a window manager whose
# compositor draws the window's frame and shadow (metacity) and xwininfo (x11-utils) to find the
# window for the screenshot, the AT-SPI bus and the Python bindings that drive it, ImageMagick for
# the screenshot and the photo's pixels. Without recommends (GTK's pull in a desktop's worth of
# packages); the test was checked on a machine with exactly these.
install_missing --no-install-recommends libgtk-4-dev libadwaita-1-dev xvfb xauth metacity x11-utils at-spi2-core python3-pyatspi \
    gir1.2-atspi-2.0 imagemagick

# Headless Chromium for the interactive sign-in tests (a real browser completes the flow).
# Without recommends: its one recommendation, chromium-sandbox, is not needed (the tests run it with
# --no-sandbox); headless sign-in was checked on a machine without it.
install_missing --no-install-recommends chromium

# The identity broker's end-to-end tests (#47, scripts/test-broker.sh): Microsoft's authentication
# runtime (pymsalruntime, below) links WebKitGTK 4.1, JavaScriptCore and libsoup 3 (its wheel bundles
# none of them); unshare, setpriv (util-linux), ip and openssl build the harness's namespace and test CA.
# Without recommends: the runtime only links these libraries (ldd), their Depends bring the rest.
install_missing --no-install-recommends libwebkit2gtk-4.1-0 libjavascriptcoregtk-4.1-0 libsoup-3.0-0 iproute2 openssl dbus-bin

# MSAL Python (the interop reference) in a venv that can also see Debian's gi bindings, with its broker
# extra (pymsalruntime 0.20.7, the runtime broker-enabled apps load).
VENV=.venv
if ! "$VENV/bin/python" -c 'import msal, msal_extensions, importlib.util as u; assert u.find_spec("pymsalruntime")' 2>/dev/null; then
    echo "Creating $VENV with msal[broker] 1.39.0 and msal-extensions" >&2
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "msal[broker]==1.39.0" "msal-extensions==1.3.1"
fi

# The real Azure CLI (from PyPI, about 40 s and 700 MB) for the tests that check what it reads from
# a cache this project changed; in its own venv, so the interop venv keeps its exact versions.
# --system-site-packages: Debian's gi bindings, for its encrypted (libsecret) token cache.
AZ_VENV=.venv-azure-cli
if ! "$AZ_VENV/bin/az" version >/dev/null 2>&1; then
    echo "Creating $AZ_VENV with azure-cli 2.91.0" >&2
    /usr/bin/python3 -m venv --system-site-packages "$AZ_VENV"
    "$AZ_VENV/bin/pip" install -q --disable-pip-version-check "azure-cli==2.91.0"
fi

# The real azure-identity (PyPI) for the token agent's managed-identity endpoint tests: its
# ManagedIdentityCredential must get a token from the agent with no code change.
AZID_VENV=.venv-azure-identity
if ! "$AZID_VENV/bin/python" -c 'import azure.identity' 2>/dev/null; then
    echo "Creating $AZID_VENV with azure-identity 1.27.0" >&2
    /usr/bin/python3 -m venv "$AZID_VENV"
    "$AZID_VENV/bin/pip" install -q --disable-pip-version-check "azure-identity==1.27.0"
fi
