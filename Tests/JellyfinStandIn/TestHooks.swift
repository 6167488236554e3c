import FarcastSupport
import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// The stand-in's test hooks (no auth; the stand-in listens on loopback only): approve a Quick
/// Connect code, revoke a user's tokens, push a session message, set a resume position, and
/// switch malformed answers on and off for a path.
enum TestHooks {
    static func register(on router: Router<BasicRequestContext>, api: StandInAPI, state: StandInState, hub: SocketHub,
                         faults: Locked<[String: String]>) {
        @Sendable func user(_ request: Request) -> StandInState.User? {
            let name = request.uri.queryParameters["user"].map(String.init) ?? "demo"
            return state.users.first { $0.name.caseInsensitiveCompare(name) == .orderedSame || $0.id == name }
        }
        router.post("/StandIn/QuickConnect/Approve") { request, _ -> Response in
            guard let code = request.uri.queryParameters["code"].map(String.init), let user = user(request),
                  state.approveQuickConnect(code: code, userId: user.id) else {
                return Response(status: .notFound, body: ResponseBody(byteBuffer: ByteBuffer(string: "no pending request with that code")))
            }
            return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "approved for \(user.name)")))
        }
        router.post("/StandIn/Revoke") { request, _ -> Response in
            guard let user = user(request) else { return Response(status: .notFound) }
            let revoked = state.revokeAll(userId: user.id)
            for token in revoked { hub.close(token: token) }
            return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "\(revoked.count)")))
        }
        router.post("/StandIn/Send") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            let sent = hub.send(String(buffer: body))
            return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "\(sent)")))
        }
        router.post("/StandIn/Position") { request, _ -> Response in
            guard let user = user(request), let item = request.uri.queryParameters["item"].map(String.init),
                  let ticks = request.uri.queryParameters["ticks"].flatMap({ Int64(String($0)) }),
                  api.setPosition(userId: user.id, itemId: item, ticks: ticks) else { return Response(status: .notFound) }
            return Response(status: .ok)
        }
        router.post("/StandIn/Fault") { request, _ -> Response in
            guard let path = request.uri.queryParameters["path"].map(String.init), let mode = request.uri.queryParameters["mode"].map(String.init) else {
                return Response(status: .badRequest)
            }
            faults.withLock { if mode == "clear" { $0.removeValue(forKey: path) } else { $0[path] = mode } }
            return Response(status: .ok)
        }
        router.get("/StandIn/Sockets") { _, _ -> Response in
            Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "\(hub.count)")))
        }
    }
}
