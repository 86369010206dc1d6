"""The machine the original's recordings were made on, as they show it: facts a replay gives its
containers so that gold and agent see that machine's world, not this one's.

The recordings were made under Docker Desktop on an arm64 Mac: its Linux VM's kernel (`grpcfuse`,
`shiftfs` and `fakeowner` are Docker Desktop's, `amba` and `pl011` are arm64 devices) is what `/sys`
showed. The containers of a replay run on this machine's kernel, whose `/sys` is another.
"""

from __future__ import annotations

import struct

# The original's two containers on Docker's default bridge, in the order its BashEnv made them
# (the agent's, then the gold's): the addresses /etc/hosts gives their host names.
ADDRESSES = ("172.17.0.2", "172.17.0.3")

# The kernel modules in the original host's /sys/module: every one that the recordings name. Two
# recordings of fs1 #55 ran `grep -r hello .` from `/` and listed the files it could not read
# (`grep: ./sys/module/acpiphp/uevent: Permission denied`), 131 modules, GPT-4's and
# text-davinci-003's alike. One matters to a gold: `find -name '*php' | xargs cat | wc -l` (fs1 #21),
# run from `/`, finds `./sys/module/acpiphp` and prints `cat: ./sys/module/acpiphp: Is a directory`
# beside its count, so an agent that counted the two PHP files alone matched its output in no
# recording (0.67 on every turn, every model). This machine's kernel has no `acpiphp`.
MODULES = tuple("""
    8021q 8250 8250_core 842_compress 842_decompress acpi acpiphp ahci arm_ccn ata_generic
    auth_rpcgss battery blk_cgroup block bridge button cachefiles cifs configfs cpufreq cpuidle
    crc_t10dif cryptomgr dm_bufio dm_mod dm_snapshot dm_thin_pool dns_resolver ec_sys efi_pstore
    fakeowner fb firmware_class fscache fscrypto fuse gpiolib_acpi grace grpcfuse hid hisi_rng
    hisi_sas_main ima ip6_tunnel ip_set ip_vs ip_vs_ftp ipip ipv6 kernel keyboard kvm libahci libata
    lockd loop megaraid_sas mousedev mptbase mptscsih mptspi nbd netfs nf_conntrack
    nf_conntrack_amanda nf_conntrack_ftp nf_conntrack_h323 nf_conntrack_irc nf_conntrack_netbios_ns
    nf_conntrack_sane nf_conntrack_sip nf_conntrack_snmp nf_conntrack_tftp nfs nfsd nvme nvme_core
    overlay page_reporting pata_acpi pata_platform pata_sis pci_hotplug pcie_aspm pciehp pnp printk
    processor pstore random rcupdate rcutree rng_core scsi_mod secretmem sg shiftfs slab_common
    spurious sr_mod srcutree sunrpc sysrq tcp_cubic thermal tpm tpm_crb usbcore usbhid virtio_blk
    virtio_mmio virtio_net virtio_pci virtio_pci_modern_dev vmw_vsock_virtio_transport
    vmw_vsock_virtio_transport_common vsock vt vxlan workqueue xen xen_blkfront xen_gntalloc
    xen_gntdev xen_kbdfront xen_netfront xen_privcmd xfrm_algo xfrm_user xt_recent xz_dec
""".split())

# What /proc said of the original host's uptime and load (`uptime`, `w`, /proc/loadavg read them). At
# fs4 #25 GPT-4 read the load from /proc/loadavg (0.03) and then as `uptime | awk '{print $10}'`
# (0.03 again): the tenth field of `uptime` is the first load average only when the host has been
# up a day or more ("up 2 days,  4:46,"). The gold, `w | head -n 1 | awk '{print $NF}'`, printed the
# fifteen-minute average, which differed (the turn scored 0 on output). This machine's kernel says
# its own: up a few hours, `$10` is the fifteen-minute average, and the agent matched the gold.
# The replay gives its containers these two files, read-only; the loads are the recording's
# first minute's (0.03) and values below it, the process counts made up (nothing read them).
PROC = {
    "/proc/uptime": "190000.00 370000.00\n",  # up 2 days, 4:46
    "/proc/loadavg": "0.03 0.02 0.00 1/120 4242\n",
}

# Its file system's inodes: ext4's default 256 bytes, in which overlay's two xattrs of a copied-up
# directory that holds copied-up entries (`trusted.overlay.origin` and `.impure`) do not fit, so they
# take a block of their own and `du` counts the directory 8K. Every fs3 recording shows it for
# /workspace once episodes had changed what it holds (fs3 #7 removes files, #11 and #12 move them):
# `du` of it 100K where its entries add up to 92K (GPT-4, text-bison-001 and text-davinci-003 at #14,
# StarChat at #50), and `ls -al` a total 4K above its entries' with `.` of size 4096 (StarChat #9).
# Our capped layers have 512-byte inodes (foundation/pool/disk.py); a replay's get the original's.
INODE_BYTES = 256


def recording_zone(offset_s: int, name: str = "UTC") -> bytes:
    """A time zone file (TZif, version 2) of one zone `offset_s` seconds east of UTC, named `name`:
    the original's containers were on UTC, and a replay's, whose kernel clock is this day's, show
    the recording's day and time with the offset between the two. glibc takes any offset from
    such a file (a TZ string stops at 24 hours), so `date`, `ls -l` and `cal` print that wall clock."""
    abbreviation = name.encode() + b"\0"

    def block() -> bytes:  # no transitions, one type, no leap seconds: alike for 32- and 64-bit times
        counts = struct.pack(">6l", 0, 0, 0, 0, 1, len(abbreviation))
        return b"TZif2" + bytes(15) + counts + struct.pack(">lBB", offset_s, 0, 0) + abbreviation

    return block() + block() + b"\n\n"  # no TZ string after the data: the one type holds for ever
