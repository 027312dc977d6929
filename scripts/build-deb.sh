#!/usr/bin/env bash
# Builds the Debian package tokencache_<version>_<arch>.deb (dpkg-deb) with everything an app,
# script or admin needs, as one package so `apt install ./tokencache_*.deb` is the whole install:
#   /usr/bin/tokencache                         the CLI (scripts/build-release.sh: static Swift runtime)
#   /usr/share/man/man1/tokencache.1.gz         its man page, and bash, zsh and fish completions
#   /usr/share/{bash-completion/completions,zsh/vendor-completions,fish/vendor_completions.d}/
#   /usr/lib/<triplet>/libtokencache.so.0*      the C library (scripts/build-c-library.sh), and for
#   /usr/include/tokencache.h, .so, pkgconfig/  building against it the header, link and .pc file
#   /usr/lib/python3/dist-packages/tokencache/  the Python binding (pure Python, ctypes)
#   /usr/share/doc/tokencache/examples/         the C and Python examples
# Nothing in it needs the Swift toolchain. Depends are computed from what the two ELF files link
# (the package owning each library; libc6 at the highest GLIBC_ symbol version used); what the
# library loads with dlopen when first used is recommended: libsecret-1-0 (the keyring), libssl3
# (the encrypted file), libcurl4 (token refresh).
#   scripts/build-deb.sh [OUTPUT_DIRECTORY]     default .build/deb; prints the .deb's path
# TOKENCACHE_BINARY / TOKENCACHE_C_LIBRARY: use a CLI binary / library directory built already.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="$(realpath -m "${1:-.build/deb}")"
arch="$(dpkg --print-architecture)"
triplet="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
version="$(awk '/#define TOKENCACHE_VERSION_(MAJOR|MINOR|PATCH)/ { v = v (v == "" ? "" : ".") $3 } END { print v }' \
    Sources/CTokenCache/include/tokencache.h)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
ROOT="$WORK/root"

# The CLI with its man page and completions, through the install script; then Debian's places.
if [ -z "${TOKENCACHE_BINARY:-}" ]; then
    scripts/build-release.sh tokencache >&2
    TOKENCACHE_BINARY="$(scripts/build-release.sh --show-bin-path)/tokencache"
fi
TOKENCACHE_BINARY="$TOKENCACHE_BINARY" DESTDIR="$ROOT" PREFIX=/usr scripts/install.sh >&2
strip --strip-unneeded "$ROOT/usr/bin/tokencache"
gzip -9n "$ROOT/usr/share/man/man1/tokencache.1"
mkdir -p "$ROOT/usr/share/zsh/vendor-completions"
mv "$ROOT/usr/share/zsh/site-functions/_tokencache" "$ROOT/usr/share/zsh/vendor-completions/_tokencache"
rmdir "$ROOT/usr/share/zsh/site-functions"

# The C library, header and pkg-config file.
lib="${TOKENCACHE_C_LIBRARY:-}"
if [ -z "$lib" ]; then
    lib="$WORK/c-library"
    PREFIX=/usr LIBDIR="/usr/lib/$triplet" scripts/build-c-library.sh "$lib" >&2
fi
install -d "$ROOT/usr/lib/$triplet/pkgconfig" "$ROOT/usr/include"
cp -P "$lib"/lib/libtokencache.so* "$ROOT/usr/lib/$triplet/"
chmod 0644 "$ROOT/usr/lib/$triplet/libtokencache.so.$version"
install -m 0644 "$lib/include/tokencache.h" "$ROOT/usr/include/tokencache.h"
sed -e "s|^prefix=.*|prefix=/usr|" -e "s|^libdir=.*|libdir=/usr/lib/$triplet|" -e "s|^includedir=.*|includedir=/usr/include|" \
    "$lib/lib/pkgconfig/tokencache.pc" > "$ROOT/usr/lib/$triplet/pkgconfig/tokencache.pc"

# The Python binding and the examples.
install -D -m 0644 python/tokencache/__init__.py "$ROOT/usr/lib/python3/dist-packages/tokencache/__init__.py"
install -D -m 0644 Examples/c/example.c "$ROOT/usr/share/doc/tokencache/examples/example.c"
install -D -m 0644 Examples/python/example.py "$ROOT/usr/share/doc/tokencache/examples/example.py"
install -D -m 0644 python/README.md "$ROOT/usr/share/doc/tokencache/README.python.md"

# Depends: the package of each library the ELF files need, libc6 at the newest symbol version used.
elves=("$ROOT/usr/bin/tokencache" "$ROOT/usr/lib/$triplet/libtokencache.so.$version")
depends=()
for needed in $(for elf in "${elves[@]}"; do objdump -p "$elf" | awk '/NEEDED/ { print $2 }'; done | sort -u); do
    path="$(ldconfig -p | awk -v lib="$needed" '$1 == lib && /x86-64|x86_64/ { print $NF; exit }')"
    [ -n "$path" ] || { echo "build-deb.sh: no $needed on this machine" >&2; exit 1; }
    # By the real file, else by the path ldconfig gave (usrmerge: /lib and /usr/lib are one).
    package="$( (dpkg -S "$(realpath "$path")" 2>/dev/null || dpkg -S "$path" 2>/dev/null || true) | head -1 | cut -d: -f1)"
    [ -n "$package" ] || { echo "build-deb.sh: no package owns $path ($needed)" >&2; exit 1; }
    depends+=("$package")
done
glibc="$(for elf in "${elves[@]}"; do objdump -T "$elf"; done | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)"
depends_line="$(printf '%s\n' "${depends[@]}" | sort -u | sed "s/^libc6\$/libc6 (>= $glibc)/" | paste -sd, | sed 's/,/, /g')"

installed_size="$(du -sk "$ROOT" | cut -f1)"
mkdir -p "$ROOT/DEBIAN"
cat > "$ROOT/DEBIAN/control" <<CONTROL
Package: tokencache
Version: $version
Architecture: $arch
Maintainer: swift-tokencache contributors <tokencache@users.noreply.github.com>
Installed-Size: $installed_size
Depends: $depends_line
Recommends: libsecret-1-0, libssl3, libcurl4
Suggests: gnome-keyring | keepassxc, python3
Section: utils
Priority: optional
Homepage: https://github.com/swift-tokencache/swift-tokencache
Description: shared MSAL token cache for Linux desktop apps
 Apps and scripts share Microsoft identity (MSAL) sign-ins through the desktop
 keyring (Secret Service), or an encrypted file where there is none.
 .
 This package holds the tokencache command-line tool (with its man page and
 shell completions), the C library libtokencache.so.0 with its header and
 pkg-config file, and a pure-Python binding of it.
CONTROL
# The shared library is new to the linker cache on install and gone on removal.
echo "activate-noawait ldconfig" > "$ROOT/DEBIAN/triggers"
(cd "$ROOT" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$ROOT/DEBIAN/md5sums"
chmod 0644 "$ROOT/DEBIAN/control" "$ROOT/DEBIAN/triggers" "$ROOT/DEBIAN/md5sums"
find "$ROOT" -type d -exec chmod 0755 {} +

mkdir -p "$OUT"
deb="$OUT/tokencache_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$ROOT" "$deb" >&2
echo "$deb"
