import Foundation
import HTTPTypes
import HummingbirdWebSocket
import Jellyfin
import Logging
import NIOCore

/// The live session on `/socket`: the upgrade needs a token (`ApiKey=` or the header), then the
/// server sends ForceKeepAlive, answers each KeepAlive, sends `Sessions` on the interval asked
/// by `SessionsStart` until `SessionsStop`, and forwards what the hub pushes (user-data changes,
/// test messages). A revoked token closes the socket.
enum SocketEndpoint {
    static func upgrade(_ head: HTTPRequest, basePath: String, state: StandInState, hub: SocketHub, api: StandInAPI,
                        keepAlive: Int) async throws -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        let caller = StandInAuthMiddleware.caller(headers: head.headerFields, path: head.path ?? "", state: state)
        guard let token = caller.token else { return .dontUpgrade }
        let deviceId = URLComponents(string: head.path ?? "")?.queryItems?.first { $0.name.lowercased() == "deviceid" }?.value ?? caller.deviceId
        return .upgrade([:]) { inbound, outbound, _ in
            let (id, outgoing) = hub.add(token: token.token, userId: token.userId, deviceId: deviceId)
            defer { hub.remove(id) }
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.singleValueContainer()
                try container.encode(JellyfinDateTranscoder.format(date))
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Writer: whatever the hub pushes; a close ends the connection.
                group.addTask {
                    if keepAlive > 0 {
                        try await outbound.write(.text(#"{"MessageType":"ForceKeepAlive","MessageId":"\#(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased())","Data":\#(keepAlive)}"#))
                    }
                    for await message in outgoing {
                        switch message {
                        case .text(let text): try await outbound.write(.text(text))
                        case .close:
                            try await outbound.close(.policyViolation, reason: "token revoked")
                            return
                        }
                    }
                }
                // Reader: keep-alives and subscriptions.
                group.addTask {
                    var sessionsTask: Task<Void, Never>?
                    defer { sessionsTask?.cancel() }
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        guard case .text(let text) = message,
                              let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                              let type = object["MessageType"] as? String else { continue }
                        switch type {
                        case "KeepAlive":
                            _ = hub.send(SocketHub.envelope(type: "KeepAlive", dataJSON: nil)) { $0.id == id }
                        case "SessionsStart":
                            let parts = ((object["Data"] as? String) ?? "0,1500").split(separator: ",").compactMap { Int($0) }
                            let initial = parts.first ?? 0, interval = max(parts.count > 1 ? parts[1] : 1500, 100)
                            sessionsTask?.cancel()
                            sessionsTask = Task {
                                try? await Task.sleep(for: .milliseconds(initial))
                                while !Task.isCancelled {
                                    if let data = try? encoder.encode(api.sessionList()) {
                                        _ = hub.send(SocketHub.envelope(type: "Sessions", dataJSON: String(decoding: data, as: UTF8.self))) { $0.id == id }
                                    }
                                    try? await Task.sleep(for: .milliseconds(interval))
                                }
                            }
                        case "SessionsStop":
                            sessionsTask?.cancel()
                            sessionsTask = nil
                        default:
                            break
                        }
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }
}
