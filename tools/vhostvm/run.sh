#!/bin/sh
# Runs the tun/vhost tests on a kernel that has vhost-net, for hosts whose
# kernel lacks it (the project's VM: CONFIG_VHOST_NET and CONFIG_MODULES
# off, no KVM): boots Debian's distribution kernel under QEMU (TCG, two
# vCPUs) with this host's root file system read-only over 9p, loads tun,
# tap, vhost and vhost_net, and runs the package's test binary there.
# Functional only: TCG emulation says nothing about speed.
#
#   flock /tmp/pacer-traffic.lock tools/vhostvm/run.sh [test flags...]
#
# Needs root, apt-get (qemu-system-x86, busybox-static, a linux-image
# package) and about 400 MB under $WORK (default /tmp/vhostvm).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${WORK:-/tmp/vhostvm}
mkdir -p "$work/share"
cd "$work"

command -v qemu-system-x86_64 >/dev/null && command -v busybox >/dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends qemu-system-x86 busybox-static
if [ ! -d k/boot ]; then
	pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	apt-get download "$pkg"
	dpkg -x "$pkg"_*.deb k
fi
kver=$(ls k/lib/modules)
mods="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p tun tap vhost_iotlb vhost vhost_net"
rm -rf initrd && mkdir -p initrd/bin initrd/mods
cp "$(command -v busybox)" initrd/bin/busybox
for m in $mods; do cp "$(find "k/lib/modules/$kver" -name "$m.ko")" initrd/mods/; done
cat > initrd/init <<INIT
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /mnt
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in $mods; do insmod /mods/\$m.ko || echo "insmod \$m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro hostroot /mnt
mount -t proc proc /mnt/proc; mount -t sysfs sys /mnt/sys; mount -o bind /dev /mnt/dev
mount -t tmpfs tmpfs /mnt/run; mount -t tmpfs tmpfs /mnt/tmp
mkdir -p /mnt/tmp/share
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 share /mnt/tmp/share
chroot /mnt /bin/sh -c 'cd /tmp/share && HOME=/tmp PATH=/usr/sbin:/usr/bin:/sbin:/bin sh ./run.sh' > /mnt/tmp/share/out.txt 2>&1
sync
poweroff -f
INIT
chmod +x initrd/init
(cd initrd && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 > ../initrd.gz)

(cd "$repo" && CGO_ENABLED=0 go test -c -o "$work/share/vhost.test" ./tun/vhost/)
args=${*:--test.count=3 -test.v}
printf 'uname -r\n./vhost.test %s 2>&1\necho "exit $?"\n' "$args" > share/run.sh
rm -f share/out.txt
timeout 900 qemu-system-x86_64 -accel tcg -smp 2 -m 3072 -nographic -no-reboot \
	-kernel "k/boot/vmlinuz-$kver" -initrd initrd.gz \
	-append "console=ttyS0 rdinit=/init panic=-1 quiet" \
	-fsdev local,id=r,path=/,security_model=none,readonly=on -device virtio-9p-pci,fsdev=r,mount_tag=hostroot \
	-fsdev local,id=s,path="$work/share",security_model=none -device virtio-9p-pci,fsdev=s,mount_tag=share \
	-nic none > boot.log 2>&1
cat share/out.txt
tail -1 share/out.txt | grep -q '^exit 0$'
