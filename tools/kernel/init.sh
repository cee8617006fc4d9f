#!/bin/sh
# /init of the kernel lane's initramfs (busybox). It loads the modules listed in /modules.order,
# mounts the host's root (9p, read-only) under a RAM overlay, and runs the job script named by
# `vpcni.job=` on the kernel command line inside it. The last line it prints is
# VPCNI-LANE-EXIT=<code>, which tests/kernel/lane.ts reads; then it powers the VM off.
/bin/busybox --install -s /bin
export PATH=/bin

finish() {
  echo "VPCNI-LANE-EXIT=$1"
  sync
  poweroff -f
  sleep 60
}

fail() {
  echo "VPCNI-LANE-ERROR: $*"
  finish 125
}

mkdir -p /proc /sys /dev /host /rw /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

for ko in $(cat /modules.order); do
  insmod "/modules/$ko" || fail "insmod $ko failed (see the kernel message above)"
done

job=""
dmesg=0
for arg in $(cat /proc/cmdline); do
  case "$arg" in
  vpcni.job=*) job="${arg#vpcni.job=}" ;;
  vpcni.dmesg=*) dmesg="${arg#vpcni.dmesg=}" ;;
  esac
done
[ -n "$job" ] || fail "no vpcni.job= on the kernel command line"

# cache=loose: the share is read-only for the VM's lifetime, so the page cache may keep what it
# read (Deno's binary and cache are read many times).
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose host /host ||
  fail "cannot mount the host root over 9p (mount_tag=host)"

# The overlay's upper layer is RAM: writes inside the VM (Deno's caches, /var/lib/cni, …) work
# and vanish at power-off; the host is never written.
mount -t tmpfs -o mode=0755 tmpfs /rw &&
  mkdir -p /rw/upper /rw/work &&
  mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot ||
  fail "cannot mount the overlay over the host root"

mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
# /tmp stays the host's, seen through the overlay (writes go to RAM): a checkout cloned
# under /tmp, as CI may do, must be visible inside.
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mkdir -p /newroot/run/netns /newroot/run/lock
# /var/run is a symlink to /run on Debian; make it one where it is a plain directory.
[ -L /newroot/var/run ] || mount --bind /newroot/run /newroot/var/run
ip link set lo up

dmesg -n 3
echo "VPCNI-LANE-BOOTED uptime=$(cut -d' ' -f1 /proc/uptime)"
chroot /newroot /bin/sh "$job"
rc=$?
if [ "$dmesg" = 1 ]; then
  echo "--- kernel log (warnings and worse) ---"
  dmesg -r | grep '^<[0-4]>' | sed 's/^<.>//'
fi
finish $rc
