#if canImport(Darwin)
import Darwin
#endif

/// Finds the utun descriptor of an Apple packet-tunnel extension (`NEPacketTunnelProvider`),
/// which cannot create utun itself and is no longer handed the descriptor: after the tunnel's
/// network settings are applied, walk descriptors 0…1024, keep those whose peer is a
/// kernel-control socket (`AF_SYSTEM`), and take the one connected to the control named
/// `com.apple.net.utun_control` (its id comes from `CTLIOCGINFO`). WireGuard's Apple client does
/// the same.
///
/// The matching is pure and tested on Linux over an injected table; the system calls exist only
/// on Apple platforms, which these build machines are not — that part is compiled and run by
/// Apple builds alone.
public enum UtunDescriptorSearch {
    /// The kernel control utun sockets connect to.
    public static let controlName = "com.apple.net.utun_control"
    /// `AF_SYSTEM` (32) and `AF_SYS_CONTROL` (2) on Darwin.
    public static let systemFamily: UInt8 = 32
    public static let systemControl: UInt16 = 2
    /// `sizeof(struct sockaddr_ctl)` on Darwin.
    public static let socketAddressSize = 32

    /// The peer of a descriptor as far as the search cares.
    public struct Peer: Equatable, Sendable {
        public var family: UInt8
        public var controlID: UInt32
        public var unit: UInt32
        public init(family: UInt8, controlID: UInt32, unit: UInt32) {
            self.family = family
            self.controlID = controlID
            self.unit = unit
        }
    }

    /// Decodes a Darwin `sockaddr_ctl` (sc_len u8, sc_family u8, ss_sysaddr u16, sc_id u32,
    /// sc_unit u32, reserved; host byte order) as `getpeername` returns it; nil when too short
    /// or not a kernel-control address.
    public static func decodePeer(_ bytes: UnsafeRawBufferPointer) -> Peer? {
        guard bytes.count >= 12, let p = bytes.baseAddress else { return nil }
        let family = p.load(fromByteOffset: 1, as: UInt8.self)
        let subsystem = p.loadUnaligned(fromByteOffset: 2, as: UInt16.self)
        guard family == systemFamily, subsystem == systemControl else { return nil }
        return Peer(family: family, controlID: p.loadUnaligned(fromByteOffset: 4, as: UInt32.self),
                    unit: p.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
    }

    /// The first descriptor in `range` whose peer is the utun control `controlID`.
    /// `peer` answers for one descriptor (nil: closed, not a socket, or another kind).
    public static func find(controlID: UInt32, in range: ClosedRange<Int32> = 0...1024,
                            peer: (Int32) -> Peer?) -> Int32? {
        for fd in range {
            if let found = peer(fd), found.family == systemFamily, found.controlID == controlID { return fd }
        }
        return nil
    }

    /// The utun interface name for a connected unit: `sc_unit` N + 1 is `utunN`.
    public static func interfaceName(unit: UInt32) -> String? {
        unit >= 1 ? "utun\(unit - 1)" : nil
    }

    /// The unit to connect to for `utunN`: N + 1; 0 (any free unit) for nil.
    public static func unit(forInterfaceName name: String?) -> UInt32? {
        guard let name else { return 0 }
        guard name.hasPrefix("utun"), let n = UInt32(name.dropFirst(4)), n < UInt32.max else { return nil }
        return n + 1
    }

    #if canImport(Darwin)
    /// `CTLIOCGINFO` = `_IOWR('N', 3, struct ctl_info)` (struct ctl_info is 100 bytes).
    static let controlInfoRequest: UInt = 0xC064_4E03
    /// `UTUN_OPT_IFNAME`.
    static let interfaceNameOption: Int32 = 2
    /// `SYSPROTO_CONTROL`.
    static let controlProtocol: Int32 = 2

    /// The control id of `com.apple.net.utun_control`, from a throwaway control socket.
    public static func utunControlID() -> UInt32? {
        let fd = socket(Int32(systemFamily), SOCK_DGRAM, controlProtocol)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = ctl_info()
        withUnsafeMutableBytes(of: &info.ctl_name) { raw in
            for (i, byte) in controlName.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        guard ioctl(fd, controlInfoRequest, &info) == 0 else { return nil }
        return info.ctl_id
    }

    /// The packet-tunnel extension's utun descriptor, or nil before the tunnel's settings are
    /// applied. Untested here: these machines run Linux.
    public static func tunnelFileDescriptor() -> Int32? {
        guard let controlID = utunControlID() else { return nil }
        return find(controlID: controlID) { fd in
            var address = sockaddr_ctl()
            var length = socklen_t(MemoryLayout<sockaddr_ctl>.size)
            let ok = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) == 0 }
            }
            guard ok else { return nil }
            return withUnsafeBytes(of: &address) { decodePeer($0) }
        }
    }
    #endif
}
