// The Linux kernel's TUN/TAP, virtio-net and rtnetlink interfaces for the Tunnel module.
// Swift cannot import the ioctl request macros (_IOW/_IOR are function-like), so each one is a
// static inline function here; the USO constants, absent from Debian 12's 6.1 UAPI headers, are
// defined with the values of the kernel >= 6.2 headers.
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <sys/ioctl.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

#ifndef TUN_F_USO4
#define TUN_F_USO4 0x20
#endif
#ifndef TUN_F_USO6
#define TUN_F_USO6 0x40
#endif
#ifndef VIRTIO_NET_HDR_GSO_UDP_L4
#define VIRTIO_NET_HDR_GSO_UDP_L4 5
#endif
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif

static inline unsigned long ctunnel_TUNSETIFF(void) { return TUNSETIFF; }
static inline unsigned long ctunnel_TUNGETIFF(void) { return TUNGETIFF; }
static inline unsigned long ctunnel_TUNSETPERSIST(void) { return TUNSETPERSIST; }
static inline unsigned long ctunnel_TUNGETFEATURES(void) { return TUNGETFEATURES; }
static inline unsigned long ctunnel_TUNSETOFFLOAD(void) { return TUNSETOFFLOAD; }
static inline unsigned long ctunnel_TUNSETVNETHDRSZ(void) { return TUNSETVNETHDRSZ; }
static inline unsigned long ctunnel_TUNGETVNETHDRSZ(void) { return TUNGETVNETHDRSZ; }
static inline unsigned long ctunnel_TUNSETQUEUE(void) { return TUNSETQUEUE; }
static inline unsigned long ctunnel_TUNSETOWNER(void) { return TUNSETOWNER; }
static inline unsigned long ctunnel_TUNSETGROUP(void) { return TUNSETGROUP; }

/// The sizes the Swift side hard-codes, for a test to compare against the kernel's.
static inline unsigned ctunnel_virtio_net_hdr_size(void) { return sizeof(struct virtio_net_hdr); }
static inline unsigned ctunnel_nlmsghdr_size(void) { return sizeof(struct nlmsghdr); }
static inline unsigned ctunnel_nlmsgerr_size(void) { return sizeof(struct nlmsgerr); }
static inline unsigned ctunnel_ifinfomsg_size(void) { return sizeof(struct ifinfomsg); }
static inline unsigned ctunnel_ifaddrmsg_size(void) { return sizeof(struct ifaddrmsg); }
static inline unsigned ctunnel_rtmsg_size(void) { return sizeof(struct rtmsg); }
static inline unsigned ctunnel_rtattr_size(void) { return sizeof(struct rtattr); }

/// `struct mmsghdr` and the batch socket calls, declared here because glibc exposes them only
/// under _GNU_SOURCE, which Swift's Glibc module is not built with.
struct ctunnel_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};

static inline int ctunnel_sendmmsg(int fd, struct ctunnel_mmsghdr *messages, unsigned int count, int flags) {
    return (int)syscall(SYS_sendmmsg, fd, messages, count, flags);
}

static inline int ctunnel_recvmmsg(int fd, struct ctunnel_mmsghdr *messages, unsigned int count, int flags) {
    return (int)syscall(SYS_recvmmsg, fd, messages, count, flags, (void *)0);
}

/// The control-message macros (function-like, so Swift cannot import them).
static inline unsigned long ctunnel_cmsg_space(unsigned long length) { return CMSG_SPACE(length); }
static inline unsigned long ctunnel_cmsg_len(unsigned long length) { return CMSG_LEN(length); }
static inline struct cmsghdr *ctunnel_cmsg_firsthdr(struct msghdr *message) { return CMSG_FIRSTHDR(message); }
static inline struct cmsghdr *ctunnel_cmsg_nxthdr(struct msghdr *message, struct cmsghdr *header) { return CMSG_NXTHDR(message, header); }
static inline unsigned char *ctunnel_cmsg_data(struct cmsghdr *header) { return CMSG_DATA(header); }

// Names the calling thread (the kernel keeps 15 bytes), as top -H and perf show it. prctl is
// variadic, which Swift cannot call.
static inline void ctunnel_name_this_thread(const char *name) { prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0); }
