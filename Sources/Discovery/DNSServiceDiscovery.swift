#if canImport(CDNSSD) || canImport(dnssd)
#if canImport(CDNSSD)
import CDNSSD
#else
import dnssd
#endif
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `ServiceDiscovery` over the dns_sd C API: Avahi's compatibility library on Linux (it talks to
/// avahi-daemon on the D-Bus system bus, found through `DBUS_SYSTEM_BUS_ADDRESS` or the default
/// socket), the system library on Apple platforms.
///
/// Every operation runs on a thread of its own that creates, polls, dispatches and frees its
/// `DNSServiceRef`s, so a ref is only ever touched by one thread at a time and no callback
/// runs on the caller's executor.
public struct DNSServiceDiscovery: ServiceDiscovery {
    public init() {
        _ = Self.quietCompatibilityWarning
    }

    /// Avahi's compatibility layer prints a three-line warning to stderr on first use unless this
    /// variable is set; farcast reports its own errors. Set once, before the first call, and only
    /// when the user has not set it.
    private static let quietCompatibilityWarning: Void = {
        #if os(Linux)
        setenv("AVAHI_COMPAT_NOWARN", "1", 0)
        #endif
    }()

    public func advertise(type: String, name: String, port: Int, txt: [String: String]) throws -> any ServiceAdvertisement {
        try Self.validate(type: type)
        guard (1...65535).contains(port) else { throw DiscoveryError.invalidArgument("port \(port) is not 1…65535") }
        guard !name.isEmpty, name.utf8.count <= 63 else {
            throw DiscoveryError.invalidArgument("service name \"\(name)\" must be 1…63 bytes")
        }
        return try DNSServiceAdvertisement(type: type, name: name, port: UInt16(port), txt: TXTRecord.encode(txt))
    }

    public func browse(type: String, timeout: Duration) async throws -> [DiscoveredService] {
        try Self.validate(type: type)
        let cancelled = Flag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[DiscoveredService], any Error>) in
                let thread = Thread {
                    let run = BrowseRun(type: type, deadline: ContinuousClock.now + timeout, cancelled: cancelled)
                    continuation.resume(with: run.run())
                }
                thread.name = "farcast-mdns-browse"
                thread.start()
            }
        } onCancel: {
            cancelled.set()
        }
    }

    /// `_name._tcp` or `_name._udp`, optionally with a domain suffix; the responder rejects others
    /// with a bare "bad parameter", so say what is wrong here.
    static func validate(type: String) throws {
        let labels = type.split(separator: ".", omittingEmptySubsequences: true)
        guard labels.count >= 2, labels[0].hasPrefix("_"), labels[0].count >= 2, labels[1] == "_tcp" || labels[1] == "_udp" else {
            throw DiscoveryError.invalidArgument("service type \"\(type)\" is not of the form _name._tcp")
        }
    }
}

/// A flag a task or a caller raises and a worker thread checks between poll slices.
final class Flag: Sendable {
    private let raised = Atomic<Bool>(false)
    var isRaised: Bool { raised.load(ordering: .acquiring) }
    func set() { raised.store(true, ordering: .releasing) }
    /// Raises the flag; true only for the caller that raised it first.
    func raiseOnce() -> Bool { !raised.exchange(true, ordering: .acquiringAndReleasing) }
}

/// Waits up to `milliseconds` for the refs' sockets; returns the indices of those with results
/// for DNSServiceProcessResult (none on timeout or a signal).
private func waitReadable(_ refs: [DNSServiceRef], milliseconds: Int32) -> [Int] {
    var fds = refs.map { pollfd(fd: DNSServiceRefSockFD($0), events: Int16(POLLIN), revents: 0) }
    let ready = poll(&fds, nfds_t(fds.count), milliseconds)
    guard ready > 0 else { return [] }
    return fds.indices.filter { fds[$0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 }
}

// MARK: - Advertising

/// A registration owned by one worker thread; `cancel()` asks the thread to free the ref (which
/// withdraws the records) and waits until it has.
final class DNSServiceAdvertisement: ServiceAdvertisement {
    private struct State {
        var name: String?
        var error: DiscoveryError?
        var waiters: [CheckedContinuation<String, any Error>] = []
    }

    /// The worker's side: the register callback reports here, on the worker thread.
    final class Reporter: Sendable {
        private let state = Mutex(State())

        func report(name: String?, error: DiscoveryError?) {
            let waiters = state.withLock { state -> [CheckedContinuation<String, any Error>] in
                if let error { state.error = error } else if let name { state.name = name }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters {
                if let error { waiter.resume(throwing: error) } else { waiter.resume(returning: name ?? "") }
            }
        }

        func wait() async throws -> String {
            try await withCheckedThrowingContinuation { continuation in
                let outcome = state.withLock { state -> Result<String, any Error>? in
                    if let error = state.error { return .failure(error) }
                    if let name = state.name { return .success(name) }
                    state.waiters.append(continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        }
    }

    /// The ref, handed from the creating thread to the worker, which alone uses and frees it.
    private struct HandedOff: @unchecked Sendable {
        // @unchecked: after init hands it to the worker thread, no other thread touches the ref.
        let ref: DNSServiceRef
    }

    private let reporter = Reporter()
    private let stop = Flag()
    private let cancelled = Flag()
    private let finished = DispatchSemaphore(value: 0)

    init(type: String, name: String, port: UInt16, txt: [UInt8]) throws {
        var ref: DNSServiceRef?
        let context = Unmanaged.passUnretained(reporter).toOpaque()
        let status = txt.withUnsafeBytes { txtBytes in
            DNSServiceRegister(&ref, 0, 0, name, type, nil, nil, port.bigEndian, UInt16(txtBytes.count), txtBytes.baseAddress,
                               { _, _, errorCode, name, _, _, context in
                                   guard let context else { return }
                                   let reporter = Unmanaged<Reporter>.fromOpaque(context).takeUnretainedValue()
                                   if errorCode == 0 {
                                       reporter.report(name: name.map { String(cString: $0) }, error: nil)
                                   } else {
                                       reporter.report(name: nil, error: DiscoveryError.starting("advertising", code: errorCode))
                                   }
                               }, context)
        }
        guard status == 0, let ref else {
            // deinit runs for a class whose init throws here: mark it done, as no worker exists to wait for.
            _ = cancelled.raiseOnce()
            throw DiscoveryError.starting("advertising", code: status)
        }
        let handedOff = HandedOff(ref: ref)
        // The worker holds the reporter (the callback's context) until the ref is freed.
        let thread = Thread { [reporter, stop, finished] in
            defer { finished.signal() }
            while !stop.isRaised {
                guard !waitReadable([handedOff.ref], milliseconds: 50).isEmpty else { continue }
                let status = DNSServiceProcessResult(handedOff.ref)
                if status != 0 {
                    reporter.report(name: nil, error: .failed(operation: "advertising", code: status))
                    break
                }
            }
            DNSServiceRefDeallocate(handedOff.ref)
            reporter.report(name: nil, error: .cancelled)
        }
        thread.name = "farcast-mdns-advertise"
        thread.start()
    }

    func registered() async throws -> String {
        try await reporter.wait()
    }

    func cancel() {
        guard cancelled.raiseOnce() else { return }
        stop.set()
        finished.wait()
    }

    deinit { cancel() }
}

// MARK: - Browsing

/// One browse: DNSServiceBrowse, then DNSServiceResolve for each instance, then
/// DNSServiceQueryRecord for its host's A and AAAA records (Avahi's compatibility library has
/// no DNSServiceGetAddrInfo). Confined to the thread that calls `run()`.
private final class BrowseRun {
    struct Key: Hashable {
        var name: String
        var type: String
        var domain: String
    }

    struct Found {
        var interface: UInt32
        var resolving = false
        var hostName: String?
        var port = 0
        var txt: [String: String] = [:]
        var ipv4: [String] = []
        var ipv6: [String] = []
    }

    enum Kind {
        case browse
        case resolve(Key)
        case address(Key)
    }

    /// One outstanding dns_sd operation; its address is the callback's context.
    final class Operation {
        let kind: Kind
        unowned let run: BrowseRun
        var ref: DNSServiceRef?
        var done = false
        init(kind: Kind, run: BrowseRun) {
            self.kind = kind
            self.run = run
        }
    }

    let type: String
    let deadline: ContinuousClock.Instant
    let cancelled: Flag
    var operations: [Operation] = []
    var found: [Key: Found] = [:]
    var order: [Key] = []
    var failure: DiscoveryError?

    init(type: String, deadline: ContinuousClock.Instant, cancelled: Flag) {
        self.type = type
        self.deadline = deadline
        self.cancelled = cancelled
    }

    func run() -> Result<[DiscoveredService], any Error> {
        defer {
            for operation in operations { if let ref = operation.ref { DNSServiceRefDeallocate(ref) } }
            operations = []
        }
        let browse = Operation(kind: .browse, run: self)
        let status = DNSServiceBrowse(&browse.ref, 0, 0, type, "", { _, flags, interface, errorCode, name, type, domain, context in
            guard let context else { return }
            let operation = Unmanaged<Operation>.fromOpaque(context).takeUnretainedValue()
            operation.run.browsed(flags: flags, interface: interface, errorCode: errorCode, name: name, type: type, domain: domain)
        }, Unmanaged.passUnretained(browse).toOpaque())
        guard status == 0, browse.ref != nil else { return .failure(DiscoveryError.starting("browsing", code: status)) }
        operations.append(browse)

        while failure == nil, !cancelled.isRaised {
            let remaining = deadline - .now
            guard remaining > .zero else { break }
            let live = operations.filter { !$0.done && $0.ref != nil }
            let slice = min(remaining, .milliseconds(50))
            let milliseconds = Int32(max(1, slice.components.seconds * 1000 + slice.components.attoseconds / 1_000_000_000_000_000))
            for index in waitReadable(live.map { $0.ref! }, milliseconds: milliseconds) {
                let operation = live[index]
                let status = DNSServiceProcessResult(operation.ref!)
                if status != 0 {
                    if case .browse = operation.kind { failure = .failed(operation: "browsing", code: status) }
                    operation.done = true
                }
            }
            // Free finished operations outside their own callbacks.
            for operation in operations where operation.done {
                if let ref = operation.ref { DNSServiceRefDeallocate(ref) }
                operation.ref = nil
            }
            operations.removeAll { $0.ref == nil }
        }
        if cancelled.isRaised { return .failure(CancellationError()) }
        if let failure { return .failure(failure) }
        return .success(order.compactMap { key -> DiscoveredService? in
            guard let entry = found[key], let hostName = entry.hostName, let host = entry.ipv4.first ?? entry.ipv6.first else { return nil }
            return DiscoveredService(name: key.name, type: Self.bareType(key.type), domain: key.domain, hostName: hostName,
                                     host: host, addresses: entry.ipv4 + entry.ipv6, port: entry.port, txt: entry.txt)
        })
    }

    /// "_sendspin._tcp." → "_sendspin._tcp", as callers name types.
    static func bareType(_ type: String) -> String { type.hasSuffix(".") ? String(type.dropLast()) : type }

    func browsed(flags: DNSServiceFlags, interface: UInt32, errorCode: DNSServiceErrorType,
                 name: UnsafePointer<CChar>?, type: UnsafePointer<CChar>?, domain: UnsafePointer<CChar>?) {
        guard errorCode == 0 else {
            failure = DiscoveryError.starting("browsing", code: errorCode)
            return
        }
        guard let name, let type, let domain else { return }
        let key = Key(name: String(cString: name), type: String(cString: type), domain: String(cString: domain))
        guard flags & DNSServiceFlags(kDNSServiceFlagsAdd) != 0 else {
            // Gone: drop it (a later add starts over).
            found[key] = nil
            order.removeAll { $0 == key }
            return
        }
        // The same instance is reported once per interface and protocol; resolve it once.
        guard found[key] == nil else { return }
        found[key] = Found(interface: interface)
        order.append(key)
        let resolve = Operation(kind: .resolve(key), run: self)
        let status = DNSServiceResolve(&resolve.ref, 0, interface, name, type, domain, { _, _, interface, errorCode, _, host, port, txtLength, txt, context in
            guard let context else { return }
            let operation = Unmanaged<Operation>.fromOpaque(context).takeUnretainedValue()
            operation.run.resolved(operation, interface: interface, errorCode: errorCode, host: host, port: port,
                                   txt: txt.map { Array(UnsafeBufferPointer(start: $0, count: Int(txtLength))) } ?? [])
        }, Unmanaged.passUnretained(resolve).toOpaque())
        if status == 0, resolve.ref != nil { operations.append(resolve) }
    }

    func resolved(_ operation: Operation, interface: UInt32, errorCode: DNSServiceErrorType, host: UnsafePointer<CChar>?,
                  port: UInt16, txt: [UInt8]) {
        operation.done = true
        guard case .resolve(let key) = operation.kind, var entry = found[key], entry.hostName == nil else { return }
        guard errorCode == 0, let host else { return }
        entry.hostName = String(cString: host)
        entry.port = Int(UInt16(bigEndian: port))
        entry.txt = TXTRecord.decode(txt)
        found[key] = entry
        for recordType in [kDNSServiceType_A, kDNSServiceType_AAAA] {
            let query = Operation(kind: .address(key), run: self)
            let status = DNSServiceQueryRecord(&query.ref, 0, interface, host, UInt16(recordType), UInt16(kDNSServiceClass_IN),
                                               { _, flags, _, errorCode, _, _, _, length, data, _, context in
                guard let context else { return }
                let operation = Unmanaged<Operation>.fromOpaque(context).takeUnretainedValue()
                operation.run.addressed(operation, flags: flags, errorCode: errorCode, length: Int(length), data: data)
            }, Unmanaged.passUnretained(query).toOpaque())
            if status == 0, query.ref != nil { operations.append(query) }
        }
    }

    func addressed(_ operation: Operation, flags: DNSServiceFlags, errorCode: DNSServiceErrorType, length: Int,
                   data: UnsafeRawPointer?) {
        guard case .address(let key) = operation.kind, var entry = found[key] else {
            operation.done = true
            return
        }
        guard errorCode == 0, flags & DNSServiceFlags(kDNSServiceFlagsAdd) != 0, let data, length == 4 || length == 16 else { return }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        guard inet_ntop(length == 4 ? AF_INET : AF_INET6, data, &text, socklen_t(text.count)) != nil else { return }
        let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // Every address is kept (a host may have several A records; punktfunk ranks them); the
        // queries stay open until the browse's deadline.
        if length == 4 {
            if !entry.ipv4.contains(address), entry.ipv4.count < 16 { entry.ipv4.append(address) }
        } else if !entry.ipv6.contains(address), entry.ipv6.count < 16 {
            entry.ipv6.append(address)
        }
        found[key] = entry
    }
}
#endif
