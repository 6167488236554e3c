import Foundation
import Synchronization

/// The stand-in's live sessions: every open `/socket`, who it belongs to, and a way to push a
/// message to some of them or to close them (when their token is revoked).
final class SocketHub: Sendable {
    struct Connection: Sendable {
        var id: Int
        var token: String
        var userId: String
        var deviceId: String
        var send: AsyncStream<Outgoing>.Continuation
    }

    enum Outgoing: Sendable {
        case text(String)
        case close
    }

    private let state = Mutex<(next: Int, connections: [Int: Connection])>((1, [:]))

    func add(token: String, userId: String, deviceId: String) -> (id: Int, outgoing: AsyncStream<Outgoing>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Outgoing.self)
        let id = state.withLock { s in
            let id = s.next
            s.next += 1
            s.connections[id] = Connection(id: id, token: token, userId: userId, deviceId: deviceId, send: continuation)
            return id
        }
        return (id, stream)
    }

    func remove(_ id: Int) {
        let removed = state.withLock { $0.connections.removeValue(forKey: id) }
        removed?.send.finish()
    }

    func send(_ text: String, where filter: (Connection) -> Bool = { _ in true }) -> Int {
        let targets = state.withLock { $0.connections.values.filter(filter) }
        for target in targets { target.send.yield(.text(text)) }
        return targets.count
    }

    /// Closes every socket opened with `token`.
    func close(token: String) {
        let targets = state.withLock { $0.connections.values.filter { $0.token == token } }
        for target in targets { target.send.yield(.close) }
    }

    /// Closes every socket (server shutting down).
    func closeAll() {
        let targets = state.withLock { Array($0.connections.values) }
        for target in targets { target.send.yield(.close) }
    }

    var count: Int { state.withLock { $0.connections.count } }

    var deviceIds: Set<String> { state.withLock { Set($0.connections.values.map(\.deviceId)) } }

    /// A message in the server's envelope, with a fresh dash-less MessageId.
    static func envelope(type: String, dataJSON: String?) -> String {
        let id = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        if let dataJSON { return #"{"MessageType":"\#(type)","MessageId":"\#(id)","Data":\#(dataJSON)}"# }
        return #"{"MessageType":"\#(type)","MessageId":"\#(id)"}"#
    }
}
