#if canImport(Darwin)
import Darwin

/// utun devices on Apple platforms: each packet carries a 4-byte address-family prefix, which
/// the queue adds and strips. Not built or run on these Linux machines; the pure parts
/// (`PacketFraming.addressFamily`, `UtunDescriptorSearch`) are unit-tested on Linux.
extension TunDevice {
    /// Creates a utun device (macOS, root). `configuration.name` may be `utunN`; nil takes the
    /// first free unit. Only single-queue TUN without offload exists on Darwin.
    public convenience init(_ configuration: Configuration = Configuration()) throws(TunnelError) {
        guard configuration.layer == .tun, configuration.queues == 1, !configuration.offload,
              !configuration.persistent, !configuration.packetInformation else {
            throw .unsupported("utun offers one non-persistent TUN queue without offload")
        }
        guard let unit = UtunDescriptorSearch.unit(forInterfaceName: configuration.name) else {
            throw .invalidName(configuration.name ?? "", reason: "utun names are utun0, utun1…")
        }
        guard let controlID = UtunDescriptorSearch.utunControlID() else {
            throw .unsupported("the utun kernel control is not available")
        }
        let fd = socket(Int32(UtunDescriptorSearch.systemFamily), SOCK_DGRAM, UtunDescriptorSearch.controlProtocol)
        guard fd >= 0 else { throw TunnelError.failed("open a kernel-control socket", errno) }
        var address = sockaddr_ctl()
        address.sc_len = UInt8(MemoryLayout<sockaddr_ctl>.size)
        address.sc_family = UInt8(UtunDescriptorSearch.systemFamily)
        address.ss_sysaddr = UInt16(UtunDescriptorSearch.systemControl)
        address.sc_id = controlID
        address.sc_unit = unit
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_ctl>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw TunnelError.failed("create \(configuration.name ?? "a utun device")", code)
        }
        do {
            try self.init(adopting: [fd])
        } catch {
            close(fd)
            throw error
        }
    }

    /// Adopts a utun descriptor (from `UtunDescriptorSearch.tunnelFileDescriptor()` or any
    /// connected utun control socket), taking ownership.
    public convenience init(adopting fileDescriptors: [Int32]) throws(TunnelError) {
        guard fileDescriptors.count == 1, let fd = fileDescriptors.first else {
            throw .unsupported("utun has one descriptor per device")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = socklen_t(name.count)
        guard getsockopt(fd, UtunDescriptorSearch.controlProtocol, UtunDescriptorSearch.interfaceNameOption, &name, &length) == 0 else {
            throw .invalidConfiguration("descriptor \(fd) is not a utun socket (UTUN_OPT_IFNAME: \(TunnelError.reason(errno)))")
        }
        let interfaceName = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let queue = try TunQueue(fileDescriptor: fd, framing: .addressFamily)
        self.init(name: interfaceName, layer: .tun, queues: [queue], offload: [])
    }

    public convenience init(fileDescriptor: Int32) throws(TunnelError) {
        try self.init(adopting: [fileDescriptor])
    }
}
#endif
