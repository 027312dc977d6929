# apt_get ARGS...: apt-get as root (sudo when needed), non-interactive, that waits up to 10 minutes
# for a dpkg lock held by apt's own timers (apt-daily, unattended-upgrades often hold it in a fresh
# VM's first minutes) and tries a failed command three times in all, 20 s apart (a lists lock or
# a mirror hiccup); every use here (update, install, build-dep, purge) is safe to repeat.
# APT_ATTEMPTS=1 for a command expected to fail (a clean-up).
# No package starts a system service as a side effect (openssh-server starts sshd on Debian): while
# apt-get runs, Debian's /usr/sbin/policy-rc.d answers 101 ("action forbidden") to every start,
# unless the machine has a policy of its own, which is left as it is.
apt_get() {
    local sudo="" attempt attempts="${APT_ATTEMPTS:-3}" status=1 policy=/usr/sbin/policy-rc.d made_policy=false
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if [ "$1" != update ] && [ ! -e "$policy" ]; then
        $sudo sh -c "printf '#!/bin/sh\n# Written by swift-tokencache scripts/lib/apt.sh while apt-get runs: start no service.\nexit 101\n' > $policy && chmod 0755 $policy" \
            && made_policy=true
    fi
    for ((attempt = 1; attempt <= attempts; attempt++)); do
        if $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 "$@"; then
            status=0
            break
        fi
        if ((attempt < attempts)); then echo "apt-get $1 failed (attempt $attempt of $attempts); retrying in 20 s" >&2; sleep 20; fi
    done
    if $made_policy; then $sudo rm -f "$policy"; fi
    return $status
}
