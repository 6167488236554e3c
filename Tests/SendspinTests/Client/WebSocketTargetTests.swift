import Sendspin
import Testing

/// How server URLs are read, and the hints for the ones people paste by mistake.
struct WebSocketTargetTests {
    @Test(arguments: [
        ("ws://192.168.1.10:8927/sendspin", false, "192.168.1.10", 8927, "/sendspin"),
        ("wss://music.example/sendspin?x=1", true, "music.example", 443, "/sendspin?x=1"),
        ("ws://[::1]:8927/sendspin", false, "::1", 8927, "/sendspin"),
        ("WS://host", false, "host", 80, "/"),
    ])
    func parsesWebSocketURLs(url: String, secure: Bool, host: String, port: Int, path: String) throws {
        let target = try WebSocketDialer.Target(parsing: url)
        #expect(target.secure == secure && target.host == host && target.port == port && target.path == path)
    }

    @Test(arguments: [
        ("http://127.0.0.1:8927/", "ws://127.0.0.1:8927/sendspin"),
        ("https://h/x", "wss://h/x"),
        ("h:8927", "use ws://h:8927/sendspin"),
        ("ws://::1:8927/sendspin", "in brackets"),
        ("ws://host:99999/sendspin", "not a port"),
        ("ftp://host/", "not a WebSocket URL"),
    ])
    func mistakesGetTheFix(url: String, hint: String) {
        do {
            _ = try WebSocketDialer.Target(parsing: url)
            Issue.record("\(url) was accepted")
        } catch {
            #expect(error.description.contains(hint), "\(error)")
        }
    }
}
