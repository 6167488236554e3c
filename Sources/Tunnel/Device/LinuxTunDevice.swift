#if os(Linux)
import Glibc
import CTunnelLinux

/// Creating and adopting devices through Linux's `/dev/net/tun`.
extension TunDevice {
    /// The clone device every TUN/TAP descriptor is opened from.
    public static let cloneDevicePath = "/dev/net/tun"

    /// Creates a device (or attaches to a persistent one of the same name and kind).
    /// Throws `TunnelError.deviceMissing` without `/dev/net/tun` and `.notPermitted` without
    /// CAP_NET_ADMIN.
    public convenience init(_ configuration: Configuration = Configuration()) throws(TunnelError) {
        if let name = configuration.name { try Self.validate(name: name) }
        guard (1...256).contains(configuration.queues) else {
            throw .invalidConfiguration("queues must be 1–256, not \(configuration.queues)")
        }
        if configuration.offload && configuration.packetInformation {
            throw .invalidConfiguration("offload and packet information cannot be combined")
        }
        var flags = Int32(configuration.layer == .tun ? IFF_TUN : IFF_TAP)
        if !configuration.packetInformation { flags |= Int32(IFF_NO_PI) }
        if configuration.offload { flags |= Int32(IFF_VNET_HDR) }
        if configuration.queues > 1 { flags |= Int32(IFF_MULTI_QUEUE) }

        var descriptors: [Int32] = []
        var keep = false
        defer { if !keep { for fd in descriptors { _ = systemClose(fd) } } }
        var name = configuration.name ?? (configuration.layer == .tun ? "tun%d" : "tap%d")
        for _ in 0..<configuration.queues {
            let fd = try Self.openCloneDevice()
            descriptors.append(fd)
            name = try Self.attach(fd, name: name, flags: flags, layer: configuration.layer)
        }
        let first = descriptors[0]
        var accepted: OffloadFeatures = []
        if configuration.offload {
            var size = CInt(VirtioNetHeader.size)
            _ = ioctl(first, ctunnel_TUNSETVNETHDRSZ(), &size)
            accepted = try Self.negotiateOffload(first)
        } else {
            // A persistent device keeps what an earlier owner asked for; say plainly that we
            // take no super-packets. Fails harmlessly on kernels that want a vnet header first.
            _ = ioctl(first, ctunnel_TUNSETOFFLOAD(), CInt(0))
        }
        if configuration.persistent {
            guard ioctl(first, ctunnel_TUNSETPERSIST(), CInt(1)) == 0 else {
                throw TunnelError.failed("make \(name) persistent", errno)
            }
        }
        let framing: PacketFraming = configuration.offload ? .virtioNetHeader(size: VirtioNetHeader.size)
            : configuration.packetInformation ? .packetInformation : .none
        var queues: [TunQueue] = []
        let link: GSOSplitter.LinkLayer = configuration.layer == .tap ? .ethernet : .none
        for fd in descriptors { queues.append(try TunQueue(fileDescriptor: fd, framing: framing, linkLayer: link)) }
        keep = true
        self.init(name: name, layer: configuration.layer, queues: queues, offload: accepted)
    }

    /// Adopts TUN/TAP descriptors opened elsewhere (by another library, a parent process, or
    /// Android's `VpnService`), taking ownership: the device closes them. The name, layer and
    /// framing are read from the descriptor (`TUNGETIFF`); with a virtio-net header, offload is
    /// negotiated again so the queue knows what may arrive. Several descriptors must be queues of
    /// one device.
    public convenience init(adopting fileDescriptors: [Int32]) throws(TunnelError) {
        guard !fileDescriptors.isEmpty else { throw .invalidConfiguration("no descriptor to adopt") }
        var name = ""
        var layer = Layer.tun
        var framing = PacketFraming.none
        for (i, fd) in fileDescriptors.enumerated() {
            var request = ifreq()
            guard ioctl(fd, ctunnel_TUNGETIFF(), &request) == 0 else {
                let code = errno
                throw .invalidConfiguration("descriptor \(fd) is not an attached TUN/TAP descriptor (TUNGETIFF: \(TunnelError.reason(code)))")
            }
            let flags = Int32(UInt16(bitPattern: request.ifr_ifru.ifru_flags))
            let thisName = Self.name(of: &request)
            let thisLayer: Layer = flags & Int32(IFF_TAP) != 0 ? .tap : .tun
            var thisFraming = PacketFraming.none
            if flags & Int32(IFF_VNET_HDR) != 0 {
                var size: CInt = 0
                _ = ioctl(fd, ctunnel_TUNGETVNETHDRSZ(), &size)
                guard size == 10 || size == 12 else {
                    throw .unsupported("descriptor \(fd) uses a \(size)-byte virtio-net header; only 10 and 12 are supported")
                }
                thisFraming = .virtioNetHeader(size: Int(size))
            } else if flags & Int32(IFF_NO_PI) == 0 {
                thisFraming = .packetInformation
            }
            if i == 0 {
                (name, layer, framing) = (thisName, thisLayer, thisFraming)
            } else if thisName != name || thisLayer != layer || thisFraming != framing {
                throw .invalidConfiguration("descriptor \(fd) belongs to \(thisName), not to \(name) with the same settings")
            }
        }
        var accepted: OffloadFeatures = []
        if case .virtioNetHeader = framing {
            accepted = try Self.negotiateOffload(fileDescriptors[0])
        }
        let link: GSOSplitter.LinkLayer = layer == .tap ? .ethernet : .none
        var queues: [TunQueue] = []
        for fd in fileDescriptors { queues.append(try TunQueue(fileDescriptor: fd, framing: framing, linkLayer: link)) }
        self.init(name: name, layer: layer, queues: queues, offload: accepted)
    }

    /// Adopts one descriptor (see `init(adopting:)`).
    public convenience init(fileDescriptor: Int32) throws(TunnelError) {
        try self.init(adopting: [fileDescriptor])
    }

    /// Keeps the device after its descriptors close, or lets it go with them.
    public func setPersistent(_ persistent: Bool) throws(TunnelError) {
        guard ioctl(queues[0].fileDescriptor, ctunnel_TUNSETPERSIST(), CInt(persistent ? 1 : 0)) == 0 else {
            throw TunnelError.failed("set \(name) persistent=\(persistent)", errno)
        }
    }

    /// What the kernel's TUN driver supports (`TUNGETFEATURES`: `IFF_*` bits).
    public static func kernelFeatures() throws(TunnelError) -> UInt32 {
        let fd = try openCloneDevice()
        defer { _ = systemClose(fd) }
        var features: CUnsignedInt = 0
        guard ioctl(fd, ctunnel_TUNGETFEATURES(), &features) == 0 else {
            throw .system(operation: "TUNGETFEATURES", errno: errno)
        }
        return UInt32(features)
    }

    // MARK: - Steps

    static func openCloneDevice() throws(TunnelError) -> Int32 {
        let fd = open(cloneDevicePath, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT || code == ENODEV || code == ENXIO { throw .deviceMissing(path: cloneDevicePath) }
            // Opening the file is checked against its mode (EACCES); creating a device needs
            // CAP_NET_ADMIN (EPERM, from TUNSETIFF).
            if code == EACCES { throw .deviceNotAccessible(path: cloneDevicePath) }
            throw TunnelError.failed("open \(cloneDevicePath)", code)
        }
        return fd
    }

    /// `TUNSETIFF`: attaches `fd` to the device `name` (creating it), returns the kernel's name.
    static func attach(_ fd: Int32, name: String, flags: Int32, layer: Layer) throws(TunnelError) -> String {
        var request = ifreq()
        withUnsafeMutableBytes(of: &request.ifr_ifrn.ifrn_name) { raw in
            raw.initializeMemory(as: UInt8.self, repeating: 0)
            for (i, byte) in name.utf8.prefix(15).enumerated() { raw[i] = byte }
        }
        request.ifr_ifru.ifru_flags = Int16(truncatingIfNeeded: flags)
        guard ioctl(fd, ctunnel_TUNSETIFF(), &request) == 0 else {
            let code = errno
            let kind = layer == .tun ? "TUN" : "TAP"
            switch code {
            case EPERM, EACCES:
                throw .notPermitted(operation: "create \(kind) device \(name)", errno: code)
            case EBUSY:
                throw .system(operation: "attach to \(name) (another process holds it, or it is not multi-queue)", errno: code)
            case EINVAL:
                throw .system(operation: "create \(kind) device \(name) (an interface of that name exists with other settings: kind, queues or offload)", errno: code)
            default:
                throw .system(operation: "create \(kind) device \(name)", errno: code)
            }
        }
        return Self.name(of: &request)
    }

    static func name(of request: inout ifreq) -> String {
        withUnsafeBytes(of: &request.ifr_ifrn.ifrn_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// `TUNSETOFFLOAD` with USO first, without it on kernels older than 6.2 (EINVAL).
    /// `setOffload` makes the call and returns 0 or the errno (tests give kernels that refuse).
    static func negotiateOffload(_ fd: Int32, setOffload: (Int32, UInt32) -> Int32 = { fd, flags in
        ioctl(fd, ctunnel_TUNSETOFFLOAD(), CInt(flags)) == 0 ? 0 : errno
    }) throws(TunnelError) -> OffloadFeatures {
        for features in [OffloadFeatures.preferred, .withoutUSO] {
            let code = setOffload(fd, features.rawValue)
            if code == 0 { return features }
            if code != EINVAL { throw .system(operation: "TUNSETOFFLOAD", errno: code) }
        }
        throw .unsupported("the kernel refuses checksum and TSO offload on TUN devices (TUNSETOFFLOAD: \(TunnelError.reason(EINVAL)))")
    }
}
#endif
