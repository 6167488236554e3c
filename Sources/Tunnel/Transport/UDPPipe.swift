#if os(Linux)
import Synchronization

/// A TUN/TAP device carried over plain UDP to a peer running the same: for each device queue i,
/// one `UDPBatchSocket` from local port `listenPort + i` to the peer's `port + i`, and two threads
/// — packets from the device to the peer, datagrams from the peer to the device. Nothing is
/// encrypted or authenticated: it measures and tests the device and transport code a VPN's data
/// plane runs on (what `farcast tun pipe` runs).
///
/// A TUN device whose MTU is over what the path carries (`tooBigOver`) answers the packets over
/// that size with ICMP "fragmentation needed" / "packet too big" (`PacketTooBig`) instead of
/// sending them, so the sender's path MTU discovery finds the size.
public final class UDPPipe: Sendable {
    public struct Options: Sendable {
        /// The local UDP port of queue 0 (queue i listens on `listenPort + i`).
        public var listenPort: UInt16
        /// The peer's endpoint for queue 0 (queue i sends to its port + i).
        public var peer: UDPEndpoint
        /// Packets per read or write call.
        public var batch: Int = 128
        /// The largest packet or frame a queue carries (the device's MTU, plus the Ethernet header
        /// and VLAN tags of a TAP frame).
        public var slotSize: Int = 1500
        /// Coalesce packets from the peer before they go to the device (needs an offload device).
        public var coalesce: Bool = true
        /// UDP GSO/GRO runs instead of one datagram per packet.
        public var udpOffload: Bool = true
        /// Answer packets from the device over this size with ICMP "too big" (TUN only).
        public var tooBigOver: Int?

        public init(listenPort: UInt16, peer: UDPEndpoint) {
            self.listenPort = listenPort
            self.peer = peer
        }
    }

    /// A queue's thread stopped on an error (the pipe keeps its other queues; the owner decides).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public enum Direction: Sendable { case toPeer, fromPeer }
        public var device: String
        public var queue: Int
        public var direction: Direction
        public var error: TunnelError

        public var description: String {
            "\(device) queue \(queue) \(direction == .toPeer ? "to" : "from") the peer: \(error)"
        }
    }

    public let device: TunDevice
    /// One socket per device queue, in queue order.
    public let sockets: [UDPBatchSocket]
    public let options: Options
    private let workers = WorkerThreads()
    private let answered = Atomic<Int>(0)

    /// Opens the sockets and starts carrying packets; `onFailure` runs (on the failing queue's
    /// thread) when a queue stops on an error other than `stop()`.
    public init(device: TunDevice, options: Options, onFailure: @escaping @Sendable (Failure) -> Void) throws(TunnelError) {
        let count = device.queues.count
        guard Int(options.listenPort) + count - 1 <= 65535, Int(options.peer.port) + count - 1 <= 65535 else {
            throw .invalidConfiguration("a pipe of \(count) queues needs \(count) UDP ports from \(options.listenPort) and from the peer's \(options.peer.port), within 65535")
        }
        guard (1...1024).contains(options.batch) else { throw .invalidConfiguration("a batch is 1–1024 packets, not \(options.batch)") }
        var sockets: [UDPBatchSocket] = []
        do {
            for i in 0..<count {
                sockets.append(try UDPBatchSocket(localPort: options.listenPort + UInt16(i),
                                                  remote: UDPEndpoint(address: options.peer.address, port: options.peer.port + UInt16(i)),
                                                  segmentationOffload: options.udpOffload, receiveOffload: options.udpOffload))
            }
        } catch {
            for socket in sockets { socket.close() }
            throw error
        }
        self.device = device
        self.sockets = sockets
        self.options = options
        for (i, queue) in device.queues.enumerated() {
            let socket = sockets[i]
            workers.start("tun-pipe-out-\(i)") { [self] in
                do throws(TunnelError) {
                    try carryOut(from: queue, to: socket)
                } catch .interrupted {
                } catch .closed {
                } catch {
                    onFailure(Failure(device: device.name, queue: i, direction: .toPeer, error: error))
                }
            }
            workers.start("tun-pipe-in-\(i)") { [self] in
                do throws(TunnelError) {
                    try carryIn(from: socket, to: queue)
                } catch .interrupted {
                } catch .closed {
                } catch {
                    onFailure(Failure(device: device.name, queue: i, direction: .fromPeer, error: error))
                }
            }
        }
    }

    /// Packets over the path's size answered with ICMP so far.
    public var tooBigAnswered: Int { answered.load(ordering: .relaxed) }

    /// Stops every queue's threads and waits for them; the device stays open (its owner closes
    /// it), the sockets are closed.
    public func stop() {
        device.interrupt()
        for socket in sockets { socket.interrupt() }
        workers.join()
        for socket in sockets { socket.close() }
    }

    private func carryOut(from queue: TunQueue, to socket: UDPBatchSocket) throws(TunnelError) {
        let packets = PacketBatch(capacity: options.batch, slotSize: options.slotSize)
        let answers = PacketBatch(capacity: options.batch, slotSize: PacketTooBig.maximumReplyLength)
        while true {
            packets.removeAll()
            _ = try queue.readPackets(into: packets, timeout: nil)
            if let limit = options.tooBigOver {
                answers.removeAll()
                packets.removeAll { index in
                    guard packets.length(at: index) > limit else { return false }
                    var replied = false
                    answers.append { reply in
                        let n = PacketTooBig.reply(to: UnsafeRawBufferPointer(packets[index]), mtu: limit, into: reply) ?? 0
                        replied = n > 0
                        return n
                    }
                    return replied
                }
                if !answers.isEmpty {
                    answered.add(answers.count, ordering: .relaxed)
                    try queue.writePackets(answers, coalescingWith: nil)
                }
            }
            _ = try socket.send(packets)
        }
    }

    private func carryIn(from socket: UDPBatchSocket, to queue: TunQueue) throws(TunnelError) {
        let packets = PacketBatch(capacity: options.batch, slotSize: options.slotSize)
        let gro = options.coalesce ? device.makeGROTable(capacity: options.batch) : nil
        while true {
            packets.removeAll()
            _ = try socket.receive(into: packets)
            try queue.writePackets(packets, coalescingWith: gro)
        }
    }
}
#endif
