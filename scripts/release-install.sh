#!/bin/sh
# Installs tokencache from this release tarball (scripts/release.sh made it): no Swift toolchain,
# no compiler, only a POSIX shell (python3 is used, when present, to place the Python binding).
#   ./install.sh                      into /usr/local as root, ~/.local otherwise
#   ./install.sh --prefix DIR         into DIR (bin/, lib/, include/, share/)
#   ./install.sh --uninstall [--prefix DIR]   removes what an earlier install put there
# What it installs: bin/tokencache and bin/git-credential-tokencache (git's name for its helper); lib/libtokencache.so.0 with its links and pkg-config file;
# include/tokencache.h; the man page; bash, zsh and fish completions; the Python binding; the C and
# Python examples. It records each file in PREFIX/share/tokencache/installed-files, which
# --uninstall reads (and removes nothing else).
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
if [ "$(id -u)" = 0 ]; then prefix=/usr/local; else prefix="$HOME/.local"; fi
action=install
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 64; }; prefix="$2"; shift 2 ;;
        --prefix=*) prefix="${1#--prefix=}"; shift ;;
        --uninstall) action=uninstall; shift ;;
        -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 64 ;;
    esac
done
case "$prefix" in /*) ;; *) prefix="$(pwd)/$prefix" ;; esac
manifest="$prefix/share/tokencache/installed-files"

# The directories the dynamic loader searches without help (ld.so.conf), to decide whether the
# pkg-config file must give programs an rpath.
loader_searches() {
    case "$1" in /lib|/usr/lib|/lib64|/usr/lib64|/lib/*-linux-gnu|/usr/lib/*-linux-gnu) return 0 ;; esac
    [ "$(id -u)" = 0 ] && grep -rqsx "$1" /etc/ld.so.conf /etc/ld.so.conf.d/ 2>/dev/null
}

if [ "$action" = uninstall ]; then
    [ -f "$manifest" ] || { echo "install.sh: nothing installed by this script under $prefix (no $manifest)" >&2; exit 1; }
    while IFS= read -r file; do
        rm -f "$file"
        # What python3 compiled from an installed module goes with it.
        case "$file" in
            *.py) rm -f "$(dirname "$file")/__pycache__/$(basename "$file" .py)".*.pyc
                  rmdir "$(dirname "$file")/__pycache__" 2>/dev/null || true ;;
        esac
        # Directories this install made and left empty go too (never one that holds anything else).
        dir="$(dirname "$file")"
        while [ "$dir" != "$prefix" ] && rmdir "$dir" 2>/dev/null; do dir="$(dirname "$dir")"; done
    done < "$manifest"
    rm -f "$manifest"
    rmdir "$prefix/share/tokencache" 2>/dev/null || true
    if [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi
    echo "Removed tokencache from $prefix"
    exit 0
fi

version="$(cat "$here/VERSION")"
major="${version%%.*}"
mkdir -p "$prefix/share/tokencache"
: > "$manifest.new"
# put SOURCE DESTINATION MODE: copies one file and records it.
put() {
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2.new.$$" && chmod "$3" "$2.new.$$" && mv -f "$2.new.$$" "$2"
    echo "$2" >> "$manifest.new"
}
# link TARGET NAME: a symbolic link, recorded.
link() {
    ln -sfn "$1" "$2"
    echo "$2" >> "$manifest.new"
}
put "$here/bin/tokencache" "$prefix/bin/tokencache" 0755
put "$here/bin/git-credential-tokencache" "$prefix/bin/git-credential-tokencache" 0755
put "$here/lib/libtokencache.so.$version" "$prefix/lib/libtokencache.so.$version" 0644
link "libtokencache.so.$version" "$prefix/lib/libtokencache.so.$major"
link "libtokencache.so.$major" "$prefix/lib/libtokencache.so"
put "$here/include/tokencache.h" "$prefix/include/tokencache.h" 0644
rpath=""
loader_searches "$prefix/lib" || rpath=" -Wl,-rpath,\${libdir}"
mkdir -p "$prefix/lib/pkgconfig"
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$prefix/lib|" -e "s|@INCLUDEDIR@|$prefix/include|" -e "s|@VERSION@|$version|" \
    -e "s|^Libs: .*|&$rpath|" "$here/share/tokencache/tokencache.pc.in" > "$prefix/lib/pkgconfig/tokencache.pc"
echo "$prefix/lib/pkgconfig/tokencache.pc" >> "$manifest.new"
put "$here/share/man/man1/tokencache.1" "$prefix/share/man/man1/tokencache.1" 0644
put "$here/share/bash-completion/completions/tokencache" "$prefix/share/bash-completion/completions/tokencache" 0644
put "$here/share/zsh/site-functions/_tokencache" "$prefix/share/zsh/site-functions/_tokencache" 0644
put "$here/share/fish/vendor_completions.d/tokencache.fish" "$prefix/share/fish/vendor_completions.d/tokencache.fish" 0644
for example in "$here"/share/doc/tokencache/examples/*; do
    put "$example" "$prefix/share/doc/tokencache/examples/$(basename "$example")" 0644
done
# The Python binding where this prefix's python3 looks, told where the library is, so it loads
# this copy whatever the loader searches: the user site for the user base (~/.local); else the
# entry of python3's own path under the prefix (Debian's /usr/local/lib/python3.X/dist-packages);
# else the prefix's standard one (then PYTHONPATH must name it).
python_note=""
site=""
if command -v python3 >/dev/null; then
    site="$(python3 - "$prefix" <<'PY'
import site, sys, sysconfig
prefix = sys.argv[1].rstrip("/")
if prefix == site.getuserbase().rstrip("/"):
    print(site.getusersitepackages())
else:
    under = [p for p in site.getsitepackages([prefix]) if p.startswith(prefix + "/lib/")]
    versioned = [p for p in under if "/python%d.%d/" % sys.version_info[:2] in p + "/"]
    print((versioned or under or [sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix})])[0])
PY
)"
    case "$site" in
        "$prefix"/*) ;;
        *) python_note=" (python3 named $site for the binding, outside $prefix: not installed)"; site="" ;;
    esac
else
    python_note=" (no python3 found: the Python binding was not installed)"
fi
if [ -n "$site" ]; then
    for file in "$here"/python/tokencache/*.py; do
        put "$file" "$site/tokencache/$(basename "$file")" 0644
    done
    printf '# Written by install.sh: the library this copy of the binding loads.\nLIBRARY = "%s"\n' \
        "$prefix/lib/libtokencache.so.$major" > "$site/tokencache/_installed.py"
    echo "$site/tokencache/_installed.py" >> "$manifest.new"
    # Asked once the folder exists (python3 leaves a missing site folder off its path).
    python3 -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$site" \
        || python_note=" (python3 does not search $site: add it to PYTHONPATH)"
fi
mv -f "$manifest.new" "$manifest"
if [ "$(id -u)" = 0 ] && [ -z "$rpath" ] && command -v ldconfig >/dev/null; then ldconfig; fi

echo "Installed tokencache $version under $prefix$python_note"
case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "  Add $prefix/bin to PATH to run tokencache." ;; esac
[ -z "$rpath" ] || echo "  C programs: PKG_CONFIG_PATH=$prefix/lib/pkgconfig; pkg-config gives them an rpath to $prefix/lib."
echo "  Remove it with: $0 --uninstall --prefix $prefix"
