#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import Tunnel

/// The parts of `TunDevice` that need no kernel: name rules, error wording, and how offload is
/// negotiated with kernels that refuse parts of it.
@Suite struct TunDeviceTests {
    @Test(arguments: ["tun0", "farcast%d", "a", "wg-home.1", "fifteen-bytes-x"])
    func namesTheKernelAcceptsPass(name: String) throws {
        try TunDevice.validate(name: name)
    }

    @Test(arguments: [
        ("", "empty"), ("sixteen-bytes-xx", "limit is 15"), (".", "reserved"), ("..", "reserved"),
        ("a/b", "'/'"), ("a:b", "':'"), ("a b", "white space"), ("tab\t", "white space"), ("x%d%d", "only one"),
        ("x%s", "only one"), ("ünïcödé-lönger", "limit is 15"),
    ])
    func namesTheKernelRefusesAreTypedErrorsThatSayWhy(name: String, reason: String) {
        do {
            try TunDevice.validate(name: name)
            Issue.record("'\(name)' was accepted")
        } catch {
            guard case .invalidName(let refused, _) = error else { Issue.record("\(error)"); return }
            #expect(refused == name)
            #expect(error.description.contains(reason), "\(error.description)")
        }
    }

    @Test func errorDescriptionsAreOneSentenceWithTheSystemsReason() {
        let cases: [(TunnelError, String)] = [
            (.deviceMissing(path: "/dev/net/tun"), "modprobe tun"),
            (.notPermitted(operation: "TUNSETIFF", errno: 1), "CAP_NET_ADMIN"),
            (.deviceNotAccessible(path: "/dev/net/tun"), "file's mode"),
            (.system(operation: "open /dev/net/tun", errno: 24), "Too many open files"),
            (.packetTooLarge(70000, limit: 65535), "70000-byte"),
            (.netlink(NetlinkError(operation: "add address 10.0.0.1/24 to tun0", reason: .kernel(errno: 17, message: nil))), "File exists"),
            (.netlink(NetlinkError(operation: "set tun0 up", reason: .timedOut(milliseconds: 5000))), "5000 ms"),
            (.netlink(NetlinkError(operation: "add route", reason: .kernel(errno: 22, message: "Nexthop device is not up"))), "Nexthop device is not up"),
        ]
        for (error, expected) in cases {
            #expect(error.description.contains(expected), "\(error.description)")
            #expect(!error.description.contains("\n"))
            #expect(!error.description.contains("TunnelError") && !error.description.contains("errno:"), "\(error.description)")
        }
        #expect(TunnelError.failed("TUNSETIFF", 1) == .notPermitted(operation: "TUNSETIFF", errno: 1))
        #expect(TunnelError.failed("TUNSETIFF", 13) == .notPermitted(operation: "TUNSETIFF", errno: 13))
        #expect(TunnelError.failed("TUNSETIFF", 16) == .system(operation: "TUNSETIFF", errno: 16))
    }

    #if os(Linux)
    /// A kernel before 6.2 refuses the USO flags with EINVAL: offload goes on without them. One
    /// that refuses even checksum and TSO is unsupported; another error is reported as it is.
    /// (This kernel has USO, so the fallback is driven through the call's stand-in.)
    @Test func offloadFallsBackWithoutUSOWhereTheKernelLacksIt() throws {
        let uso = OffloadFeatures([.uso4, .uso6]).rawValue
        var tried: [UInt32] = []
        let old = try TunDevice.negotiateOffload(-1) { _, flags in
            tried.append(flags)
            return flags & uso != 0 ? EINVAL : 0
        }
        #expect(old == .withoutUSO && !old.contains(.uso4))
        #expect(tried == [OffloadFeatures.preferred.rawValue, OffloadFeatures.withoutUSO.rawValue])
        #expect(try TunDevice.negotiateOffload(-1) { _, _ in 0 } == .preferred)
        #expect(throws: TunnelError.self) { try TunDevice.negotiateOffload(-1) { _, _ in EINVAL } }
        #expect(throws: TunnelError.system(operation: "TUNSETOFFLOAD", errno: EBADF)) { try TunDevice.negotiateOffload(-1) { _, _ in EBADF } }
    }
    #endif
}
