#!/usr/bin/env bash
# The release tarball as a user without Swift gets it (#60): in a private mount namespace where the
# Swift toolchain (/opt/swift) is an empty directory and /usr/local a fresh one, install.sh
# installs it twice, as root into /usr/local and as another user (uid 65534) into their
# ~/.local, and each time: `tokencache --version` names the release and commit, `man tokencache`
# shows the page, bash loads the completion, pkg-config gives the flags, the C example compiled
# with them and the Python example (system python3) read a token saved with the installed CLI,
# then `install.sh --uninstall` leaves nothing behind.
#   scripts/test-release.sh [TARBALL]      default: scripts/release.sh --tarball-only
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${TOKENCACHE_RELEASE_TEST_INSIDE:-}" != 1 ]; then
    tarball="${1:-}"
    [ -n "$tarball" ] || tarball="$(scripts/release.sh --tarball-only | tail -1)"
    tarball="$(realpath "$tarball")"
    command -v unshare setpriv >/dev/null || { echo "test-release.sh: needs unshare and setpriv (util-linux)" >&2; exit 1; }
    # Everything below runs in a mount namespace of its own: the toolchain hidden, /usr/local new.
    exec unshare --mount --propagation private env TOKENCACHE_RELEASE_TEST_INSIDE=1 bash "$0" "$tarball"
fi
tarball="$1"
for dir in /opt/swift /usr/local; do
    if [ -d "$dir" ]; then mount -t tmpfs -o mode=0755 tmpfs "$dir"; fi
done
PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
export PATH
unset LD_LIBRARY_PATH TOKENCACHE_LIBRARY PYTHONPATH PKG_CONFIG_PATH
if command -v swift swiftc >/dev/null || [ -n "$(ls -A /opt/swift 2>/dev/null)" ]; then
    echo "FAIL: a Swift toolchain is still in reach" >&2; exit 1
fi
commit="$(git rev-parse --short=12 HEAD)"
WORK="$(mktemp -d /tmp/tokencache-release.XXXXXX)"
chmod 0755 "$WORK"
trap 'rm -rf "$WORK"; ldconfig' EXIT
tar -xzf "$tarball" -C "$WORK"
unpacked="$(find "$WORK" -mindepth 1 -maxdepth 1 -type d -name 'tokencache-*')"
response="$WORK/example-response.json"
install -m 0644 Examples/example-response.json "$response"

# check PREFIX: the installed pieces work, run as the user this is called as.
cat > "$WORK/check.sh" <<'SH'
set -euo pipefail
prefix="$1" commit="$2" response="$3" work="$4"
PATH="$prefix/bin:$PATH"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
fail() { echo "FAIL ($prefix): $*" >&2; exit 1; }
version="$(tokencache --version)"
[[ "$version" == *"(commit $commit)" ]] || fail "tokencache --version printed '$version', not the commit $commit"
[ "$(command -v tokencache)" = "$prefix/bin/tokencache" ] || fail "tokencache is $(command -v tokencache)"
# git's name for the credential helper: a host it does not serve gets nothing (exit 0).
[ "$(command -v git-credential-tokencache)" = "$prefix/bin/git-credential-tokencache" ] || fail "git-credential-tokencache is $(command -v git-credential-tokencache)"
[ -z "$(printf 'protocol=https\nhost=github.com\n\n' | git-credential-tokencache get)" ] || fail "git-credential-tokencache answered for github.com"
page="$(MANWIDTH=80 man -P cat tokencache 2>/dev/null)" || fail "man tokencache found no page"
grep -q "tokencache" <<< "$page" || fail "the man page is empty"
complete="$(bash -c "source '$prefix/share/bash-completion/completions/tokencache' && complete -p tokencache")"
[[ "$complete" == *tokencache* ]] || fail "bash loaded no completion"
[ -s "$prefix/share/zsh/site-functions/_tokencache" ] && [ -s "$prefix/share/fish/vendor_completions.d/tokencache.fish" ] || fail "zsh or fish completion missing"
libs="$(pkg-config --libs tokencache)"
[[ "$libs" == *"-L$prefix/lib"*"-ltokencache"* ]] || fail "pkg-config --libs tokencache gave '$libs'"
read -r -a flags <<< "$(pkg-config --cflags --libs tokencache)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cc -o "$scratch/example" "$prefix/share/doc/tokencache/examples/example.c" "${flags[@]}"
# HOME stays (the user site of ~/.local is under it); what the CLI and library write goes to scratch.
export XDG_DATA_HOME="$scratch/data" XDG_CONFIG_HOME="$scratch/config" XDG_CACHE_HOME="$scratch/cache" \
    XDG_STATE_HOME="$scratch/state" XDG_RUNTIME_DIR="$scratch/run" TOKENCACHE_BACKEND=file
mkdir -p "$XDG_RUNTIME_DIR" && chmod 0700 "$XDG_RUNTIME_DIR"
unset DBUS_SESSION_BUS_ADDRESS
client=aaaaaaaa-0000-0000-0000-0000000e0a1e
tokencache save --client "$client" --authority https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111 \
    --scopes User.Read --response "$response" >/dev/null
output="$("$scratch/example" "$client" User.Read)" || fail "the C example failed: $output"
grep -q "access token: Bearer, expires in" <<< "$output" || fail "the C example found no token: $output"
output="$(cd "$scratch" && /usr/bin/python3 "$prefix/share/doc/tokencache/examples/example.py" "$client" User.Read)" || fail "the Python example failed: $output"
grep -q "access token: Bearer, expires" <<< "$output" || fail "the Python example found no token: $output"
where="$(cd "$scratch" && /usr/bin/python3 -c 'import tokencache; print(tokencache.__file__)')"
[[ "$where" == "$prefix"/* ]] || fail "python3 imported the binding from $where, not from the installed copy"
echo "ok: $prefix: $version; man, completions, pkg-config, C and Python examples"
SH

# list_prefix PREFIX: every file and link under it.
list_prefix() { find "$1" \( -type f -o -type l \) 2>/dev/null | sort; }

# As root, into /usr/local (the default for root).
before="$(list_prefix /usr/local)"
"$unpacked/install.sh"
bash "$WORK/check.sh" /usr/local "$commit" "$response" "$WORK"
"$unpacked/install.sh" --uninstall
after="$(list_prefix /usr/local)"
[ "$before" = "$after" ] || { echo "FAIL: /usr/local after --uninstall:" >&2; diff <(echo "$before") <(echo "$after") >&2; exit 1; }

# As another user, into ~/.local (the default for a user), with nothing of root's.
home="$WORK/user-home"
mkdir -p "$home"
chown 65534:65534 "$home"
as_user() { setpriv --reuid 65534 --regid 65534 --clear-groups env HOME="$home" PATH="$PATH" "$@"; }
as_user "$unpacked/install.sh"
[ -x "$home/.local/bin/tokencache" ] || { echo "FAIL: no ~/.local/bin/tokencache" >&2; exit 1; }
as_user bash "$WORK/check.sh" "$home/.local" "$commit" "$response" "$WORK"
as_user "$unpacked/install.sh" --uninstall
left="$(list_prefix "$home/.local")"
[ -z "$left" ] || { echo "FAIL: left in ~/.local after --uninstall:" >&2; echo "$left" >&2; exit 1; }
echo "Release tarball $(basename "$tarball"): installed without Swift as root and as a user, used from the CLI, man, bash, pkg-config, C and Python, removed"
