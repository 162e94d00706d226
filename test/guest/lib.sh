# shellcheck shell=bash
# lib.sh: what the guest suite's host-side harnesses share (test/guest/run-guest-test,
# test/guest/rig/run-rig-test). Sourced, never run: each harness sources it by its path relative
# to itself, after `set -euo pipefail`. The functions read and set the harness's globals by
# name: workdir, sockdir, log, nicsim_out, nicsim_err, qemu_err, nicsim, setup, qemu, kdir,
# busybox, nicsim_pid, qemu_pid, client_pid, cmd, t_boot, boot_timeout, and after wait_qemu
# qemu_rc, timed_out, t_first, boot_s; after stop_nicsim nicsim_alive.
#
#   now                     the time, seconds with nanoseconds
#   elapsed T0              seconds since T0 (a `now`), one decimal
#   stop_pid PID SIG SECS   sends SIG to PID (if it runs), SIGKILL after SECS, reaps it
#   cleanup                 stops by pid what a harness started: a host client ($client_pid, if
#                           any) and QEMU (TERM, 5 s), rig-nicsim (INT, 10 s); the EXIT trap
#   install_traps           traps EXIT to cleanup, INT and TERM to exit 130
#   fail MSG                prints "FAIL: MSG" and where the logs are, exits 1
#   prepare_workdir DIR     DIR made absolute and empty, with sock/; sets workdir, sockdir,
#                           log (serial.log), nicsim_out, nicsim_err, qemu_err
#   setup_qemu              QEMU 11.1 from $setup; exits 77 if it cannot be fetched or cannot
#                           start a TCG q35 machine (the only skips), fails if it has no
#                           vfio-user-pci; sets qemu
#   setup_kernel MOD...     trixie's cloud kernel (kernel_flavour=generic: the generic one) with the modules MOD and what they need from
#                           $setup, or fails; sets kdir
#   kernel_version          "VERSION ARCH" of $kdir
#   module_order            the modules of $kdir in load order, each followed by a space
#   find_busybox            a static busybox (package busybox-static), or fails; sets busybox
#   initramfs_base ROOT INIT  ROOT/bin/busybox, ROOT/init (INIT), ROOT/guest-lib.sh (what the
#                           /init scripts share) and $kdir's modules in ROOT/mods
#   initramfs_add_program ROOT DIR PROG  PROG into ROOT/DIR and its shared libraries (ldd) and
#                           dynamic loader at the host's paths under ROOT, all stripped; fails if
#                           ldd fails or a library is not found
#   initramfs_pack ROOT OUT   ROOT as a gzipped newc cpio archive in OUT
#   start_nicsim ARG...     rig-nicsim ($nicsim ARG..., SPDLOG_LEVEL=model=debug) in the
#                           background, stdout and stderr in nicsim_out, nicsim_err; sets nicsim_pid
#   wait_sockets SOCK...    waits (20 s deadline) for rig-nicsim to serve every SOCK, or fails
#   vfio_user_device SOCK ADDR [BUS]  the JSON of a vfio-user-pci device on SOCK at ADDR
#   qemu_command SMP MEM MACHINE CMDLINE ARG...  sets cmd: QEMU's common command line (TCG,
#                           -cpu max, MEM of RAM in a shared memfd, q35 with the options MACHINE
#                           (may be empty), no defaults, display, monitor or reboot), ARG...,
#                           then $kdir's kernel, the initramfs $workdir/initrd.gz, CMDLINE and
#                           the serial console in $log
#   start_qemu              prints and starts $cmd in the background, stdout in
#                           $workdir/qemu.stdout and stderr in $qemu_err; sets t_boot, qemu_pid
#   wait_qemu GRACE [HOOK]  waits for QEMU to exit, at most $boot_timeout s (then stops it:
#                           timed_out=yes), and GRACE s after the guest's RIG_GUEST_DONE (stops
#                           it, not a failure); calls HOOK every 0.5 s poll; notes t_first (QEMU
#                           start to RIG_GUEST_START); sets qemu_rc (or "stopped"), boot_s
#   stop_nicsim             notes whether rig-nicsim still ran (nicsim_alive=yes|no), stops it
#   guest_dmesg             the guest's kernel log between RIG_GUEST_DMESG_BEGIN and _END in $log

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

stop_pid() {   # $1 pid, $2 signal, $3 seconds before SIGKILL
  local pid=$1 i
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -"$2" "$pid" 2>/dev/null || true
  for ((i = 0; i < $3 * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  wait "$pid" 2>/dev/null || true
}
cleanup() { stop_pid "${client_pid:-}" TERM 5; stop_pid "${qemu_pid:-}" TERM 5; stop_pid "${nicsim_pid:-}" INT 10; }
install_traps() {
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}

fail() { echo "FAIL: $*"; echo "logs kept in $workdir"; exit 1; }

prepare_workdir() {
  workdir=$(realpath -m "$1")
  rm -rf "$workdir"
  sockdir=$workdir/sock
  mkdir -p "$sockdir"
  log=$workdir/serial.log
  nicsim_out=$workdir/nicsim.stdout
  nicsim_err=$workdir/nicsim.stderr
  qemu_err=$workdir/qemu.stderr
}

# ---- QEMU 11.1 and the kernel (scripts/guest/setup) ----
setup_qemu() {
  local probe
  if ! qemu=$("$setup" qemu 2>"$workdir/setup-qemu.log"); then
    cat "$workdir/setup-qemu.log"
    echo "SKIP: QEMU 11.1 (Debian trixie-backports, for its vfio-user client) could not be fetched here"
    exit 77
  fi
  if ! probe=$(echo quit | timeout 60 "$qemu" -accel tcg -machine q35 -nodefaults -no-user-config \
                 -display none -serial none -monitor stdio -S 2>&1); then
    echo "SKIP: QEMU 11.1 ($qemu) cannot start a TCG q35 machine here:"
    echo "$probe" | tail -n 5
    exit 77
  fi
  # from here on, every problem is a failure
  # read whole, then searched (a grep -q leaving the pipe early could SIGPIPE QEMU under pipefail)
  grep -q 'socket' <<<"$("$qemu" -device vfio-user-pci,help 2>&1 || true)" || fail "$qemu has no vfio-user-pci device"
}
setup_kernel() {   # kernel_flavour= (cloud by default, or generic) picks the meta package
  local flavour=${kernel_flavour:-cloud}
  kdir=$("$setup" kernel "$flavour" "$@" 2>"$workdir/setup-kernel.log") ||
    { cat "$workdir/setup-kernel.log"; fail "could not fetch trixie's $flavour kernel (scripts/guest/setup kernel)"; }
}
kernel_version() { echo "$(sed -n 2p "$kdir/version" | sed 's/^Version: //') $(sed -n 3p "$kdir/version")"; }
module_order() { tr '\n' ' ' <"$kdir/mods/order"; }

# ---- the initramfs ----
find_busybox() {
  busybox=$(command -v busybox || echo /bin/busybox)
  [ -x "$busybox" ] || fail "no busybox (package busybox-static)"
  if ldd "$busybox" >/dev/null 2>&1; then fail "$busybox is dynamically linked: the guest needs busybox-static"; fi
}
initramfs_base() {   # $1 root, $2 the guest's /init
  mkdir -p "$1/bin" "$1/mods"
  cp "$busybox" "$1/bin/busybox"
  cp "$2" "$1/init"
  chmod 755 "$1/init"
  cp "$(dirname "${BASH_SOURCE[0]}")/guest-lib.sh" "$1/guest-lib.sh"
  cp "$kdir"/mods/*.ko "$kdir/mods/order" "$1/mods/"
}
# The guest has no libc: a program's libraries (ldd) and the dynamic loader go in at the paths
# the host has them, as test/vm/run-vm-test does; programs and libraries stripped (the debug
# info stays in the build tree).
initramfs_add_program() {   # $1 root, $2 its directory for the program, $3 the program
  local root=$1 p=$3 libs lib
  mkdir -p "$root/$2"
  cp "$p" "$root/$2/"
  strip "$root/$2/$(basename "$p")" 2>/dev/null || true
  libs=$(ldd "$p") || fail "ldd $p failed"
  ! grep -q 'not found' <<<"$libs" || fail "ldd $p: $(grep 'not found' <<<"$libs" | tr -d '\t')"
  while read -r lib; do
    [ -n "$lib" ] || continue
    [ -f "$root$lib" ] && continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
    strip --strip-unneeded "$root$lib" 2>/dev/null || true
  done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$libs")
}
initramfs_pack() {   # $1 root, $2 the archive
  (cd "$1" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$2"
}

# ---- the model ----
start_nicsim() {
  SPDLOG_LEVEL=model=debug "$nicsim" "$@" >"$nicsim_out" 2>"$nicsim_err" </dev/null &
  nicsim_pid=$!
}
wait_sockets() {
  local deadline s what=$1
  [ $# -eq 1 ] || what="its sockets"
  deadline=$(( $(date +%s) + 20 ))
  for s in "$@"; do
    until [ -S "$s" ]; do
      kill -0 "$nicsim_pid" 2>/dev/null || { tail -n 20 "$nicsim_err"; fail "rig-nicsim exited before serving $what"; }
      [ "$(date +%s)" -lt "$deadline" ] || { tail -n 20 "$nicsim_err"; fail "rig-nicsim did not serve $s within 20 s"; }
      sleep 0.1
    done
  done
}
stop_nicsim() {
  nicsim_alive=yes
  kill -0 "$nicsim_pid" 2>/dev/null || nicsim_alive=no
  stop_pid "$nicsim_pid" INT 10
  nicsim_pid=""
}

# ---- QEMU ----
vfio_user_device() {   # $1 socket, $2 address, $3 bus (optional)
  printf '{"driver":"vfio-user-pci","socket":{"type":"unix","path":"%s"},%s"addr":"%s"}' \
    "$1" "${3:+\"bus\":\"$3\",}" "$2"
}
qemu_command() {   # $1 -smp, $2 -m, $3 q35's options, $4 the kernel's command line, then devices
  local smp=$1 mem=$2 machine=$3 append=$4
  shift 4
  cmd=("$qemu" -accel tcg -cpu max -smp "$smp" -m "$mem"
       -object "memory-backend-memfd,id=mem,size=$mem,share=on"
       -machine "q35,${machine:+$machine,}memory-backend=mem"
       -nodefaults -no-user-config -display none -no-reboot -monitor none
       "$@"
       -kernel "$kdir/vmlinuz" -initrd "$workdir/initrd.gz" -append "$append"
       -serial "file:$log")
}
start_qemu() {
  echo "qemu command: ${cmd[*]}"
  t_boot=$(now)
  "${cmd[@]}" </dev/null >"$workdir/qemu.stdout" 2>"$qemu_err" &
  qemu_pid=$!
}
# Once the guest has printed RIG_GUEST_DONE it powers off; a driver's shutdown hook on a silent
# function stalls that, so QEMU gets GRACE s, then it is stopped (that is not a failure).
wait_qemu() {   # $1 grace (seconds), $2 a function to call every poll (optional)
  local grace=$1 hook=${2:-} deadline done_at=""
  deadline=$(( $(date +%s) + boot_timeout ))
  qemu_rc="" timed_out=no t_first=""
  while kill -0 "$qemu_pid" 2>/dev/null; do
    if [ -z "$t_first" ] && [ -s "$log" ] && grep -aq '^RIG_GUEST_START' "$log"; then t_first=$(elapsed "$t_boot"); fi
    if [ -n "$hook" ]; then "$hook"; fi   # (not in a list: the hook runs under set -e)
    if [ -z "$done_at" ] && [ -f "$log" ] && grep -aq '^RIG_GUEST_DONE' "$log"; then done_at=$(date +%s); fi
    if [ -n "$done_at" ] && [ "$(date +%s)" -ge $((done_at + grace)) ]; then
      echo "guest done; QEMU had not exited $grace s later: stopping it (pid $qemu_pid)"
      stop_pid "$qemu_pid" TERM 5; qemu_rc=stopped; break
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "QEMU ran past $boot_timeout s: stopping it (pid $qemu_pid)"
      stop_pid "$qemu_pid" TERM 5; qemu_rc=stopped; timed_out=yes; break
    fi
    sleep 0.5
  done
  if [ -z "$qemu_rc" ]; then
    set +e; wait "$qemu_pid"; qemu_rc=$?; set -e
  fi
  qemu_pid=""
  boot_s=$(elapsed "$t_boot")
}

# ---- what the guest said ----
guest_dmesg() { tr -d '\r' <"$log" | sed -n '/^RIG_GUEST_DMESG_BEGIN/,/^RIG_GUEST_DMESG_END/p' | sed '1d;$d'; }
