#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TUN (layer 3, IP packets) or TAP (layer 2, Ethernet frames) device and its descriptors,
/// one `TunQueue` per queue.
///
/// Created on Linux through `/dev/net/tun` (needs CAP_NET_ADMIN), or adopted from descriptors
/// opened elsewhere — the path on Apple platforms (the utun descriptor of a packet-tunnel
/// extension, found with `UtunDescriptorSearch`) and Android (`VpnService`). A non-persistent
/// device disappears when its last descriptor closes. Configure addresses, MTU, state and routes
/// with `RouteNetlink` (Linux; the convenience methods below use it).
///
/// Invariants: `queues` is never empty; every queue has the same framing; the device is closed
/// (all descriptors) by `close()` or when the value is released.
public final class TunDevice: Sendable {
    /// Packets or frames.
    public enum Layer: String, Sendable {
        case tun, tap
    }

    /// What to create.
    public struct Configuration: Sendable, Equatable {
        /// The interface name (at most 15 bytes); nil lets the kernel pick (`tun0`, `tun1`…). A
        /// `%d` in the name is replaced by the kernel with the first free number.
        public var name: String?
        public var layer: Layer
        /// Descriptors (1 = a single-queue device; more sets `IFF_MULTI_QUEUE`).
        public var queues: Int
        /// Keep the device when the last descriptor closes (until `setPersistent(false)`).
        public var persistent: Bool
        /// Virtio-net header with checksum, TSO and (where the kernel has it) USO offload: reads
        /// may then bring GSO super-packets (super-frames on TAP), which batch reads split.
        public var offload: Bool
        /// Keep Linux's 4-byte packet-information prefix (`IFF_NO_PI` off). Rarely wanted; the
        /// queue strips and adds it for you.
        public var packetInformation: Bool

        public init(name: String? = nil, layer: Layer = .tun, queues: Int = 1, persistent: Bool = false,
                    offload: Bool = false, packetInformation: Bool = false) {
            self.name = name
            self.layer = layer
            self.queues = queues
            self.persistent = persistent
            self.offload = offload
            self.packetInformation = packetInformation
        }
    }

    /// The interface name the kernel gave the device.
    public let name: String
    public let layer: Layer
    /// One per descriptor; read each from its own thread or task.
    public let queues: [TunQueue]
    /// What the kernel agreed to hand us (`TUNSETOFFLOAD`); empty without offload.
    public let offload: OffloadFeatures

    /// What precedes each packet on the descriptors.
    public var framing: PacketFraming { queues[0].framing }

    /// The interface index (0 once the interface is gone).
    public var interfaceIndex: Int32 { Int32(bitPattern: if_nametoindex(name)) }

    /// Whether written UDP datagrams may be coalesced (the kernel takes USO packets).
    public var acceptsUDPSegmentationOffload: Bool { offload.contains(.uso4) && offload.contains(.uso6) }

    init(name: String, layer: Layer, queues: [TunQueue], offload: OffloadFeatures) {
        precondition(!queues.isEmpty)
        self.name = name
        self.layer = layer
        self.queues = queues
        self.offload = offload
    }

    /// Closes every queue (ending their reads). A non-persistent device disappears.
    public func close() {
        for queue in queues { queue.close() }
    }

    /// Interrupts every queue's reads (for shutting reader threads down before `close()`).
    public func interrupt() {
        for queue in queues { queue.interrupt() }
    }

    /// A GRO table for writing batches of up to `capacity` packets to this device, or nil when
    /// the device has no virtio-net header. UDP coalescing only where the kernel takes USO.
    public func makeGROTable(capacity: Int = 128, tcp: Bool = true, udp: Bool = true) -> GROTable? {
        guard case .virtioNetHeader = framing else { return nil }
        return GROTable(capacity: capacity, tcp: tcp, udp: udp && acceptsUDPSegmentationOffload,
                        linkHeaderLength: layer == .tap ? 14 : 0)
    }

    /// Checks a name the way the kernel will (`dev_valid_name`): 1–15 bytes, no `/`, `:` or
    /// white space, not `.` or `..`.
    public static func validate(name: String) throws(TunnelError) {
        let bytes = Array(name.utf8)
        if bytes.isEmpty { throw .invalidName(name, reason: "it is empty") }
        if bytes.count > 15 { throw .invalidName(name, reason: "it is \(bytes.count) bytes; the limit is 15") }
        if name == "." || name == ".." { throw .invalidName(name, reason: "it is reserved") }
        if bytes.contains(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: ":") || $0 <= 0x20 || $0 == 0x7f }) {
            throw .invalidName(name, reason: "it contains '/', ':', white space or a control character")
        }
        let percents = bytes.filter { $0 == UInt8(ascii: "%") }.count
        if percents > 1 || (percents == 1 && !name.contains("%d")) {
            throw .invalidName(name, reason: "only one '%d' (the kernel's number) may appear")
        }
    }
}
