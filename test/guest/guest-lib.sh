# guest-lib.sh: what the guest suite's two /init scripts share (test/guest/init, rig/init),
# sourced from the initramfs as /guest-lib.sh (lib.sh initramfs_base puts it there). busybox sh.
#
#   guest_mounts        /proc, /sys, /dev (and debugfs where the kernel has it)
#   up                  the guest's uptime in seconds
#   arg NAME            the value of rig.NAME= on the kernel command line
#   finish              the kernel log between RIG_GUEST_DMESG_BEGIN and _END (with each line's
#                       <level>: the harness judges warnings and errors by it), RIG_GUEST_DONE,
#                       power off
#   load_modules        /mods/*.ko in rounds until nothing more loads, /mods/order (dependencies
#                       first) leading, so no order is hard-wired (as test/vm/init); prints
#                       RIG_GUEST_INSMOD_FAILED per module left and RIG_GUEST_MODULES
guest_mounts() {
  mkdir -p /proc /sys /dev /tmp
  mount -t proc proc /proc
  mount -t sysfs sysfs /sys
  mount -t devtmpfs devtmpfs /dev
  mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
}
up() { cut -d' ' -f1 /proc/uptime; }
arg() { sed -n "s/.*rig\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
finish() {
  echo "RIG_GUEST_DMESG_BEGIN"
  dmesg -r
  echo "RIG_GUEST_DMESG_END"
  echo "RIG_GUEST_DONE uptime=$(up)"
  poweroff -f || reboot -f
}
load_modules() {
  local pending="" left="" m
  for m in $(cat /mods/order 2>/dev/null); do pending="$pending /mods/$m"; done
  for m in /mods/*.ko; do
    case " $pending " in *" $m "*) ;; *) pending="$pending $m" ;; esac
  done
  while [ -n "$pending" ]; do
    left=""
    for m in $pending; do insmod "$m" 2>/dev/null || left="$left $m"; done
    [ "$(echo $left)" = "$(echo $pending)" ] && break
    pending=$left
  done
  for m in $left; do echo "RIG_GUEST_INSMOD_FAILED $m: $(insmod "$m" 2>&1)"; done
  echo "RIG_GUEST_MODULES $(cut -d' ' -f1 /proc/modules | tr '\n' ' ')uptime=$(up)"
}
