# apt_get ARGS...: apt-get as root (sudo when needed), non-interactive, that waits up to 10 minutes
# for a dpkg lock held by apt's own timers (apt-daily, unattended-upgrades often hold it in a fresh
# VM's first minutes) and tries a failed command three times in all, 20 s apart (a lists lock or
# a mirror hiccup); every use here (update, install, build-dep, purge) is safe to repeat.
# APT_ATTEMPTS=1 for a command expected to fail (a clean-up).
apt_get() {
    local sudo="" attempt attempts="${APT_ATTEMPTS:-3}"
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    for ((attempt = 1; attempt <= attempts; attempt++)); do
        if $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 "$@"; then
            return 0
        fi
        if ((attempt < attempts)); then echo "apt-get $1 failed (attempt $attempt of $attempts); retrying in 20 s" >&2; sleep 20; fi
    done
    return 1
}
