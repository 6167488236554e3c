import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Broken answers on demand (`POST /StandIn/Fault?path=/Items&mode=…`), for the client's
/// malformed-response tests: what a buggy proxy, a crashed server or a hostile one sends.
enum FaultResponses {
    static let itemJSON = #"{"Name":"Broken","ServerId":"0","Id":"0123456789abcdef0123456789abcdef","Type":"Movie","IsFolder":false}"#

    static func response(mode: String, path: String, api: StandInAPI) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        switch mode {
        case "truncated":
            let whole = #"{"Items":[\#(itemJSON),\#(itemJSON)],"TotalRecordCount":2,"StartIndex":0}"#
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: String(whole.prefix(whole.count / 2)))))
        case "wrong-types":
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"Items":"none","TotalRecordCount":"many","StartIndex":0}"#)))
        case "not-json":
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: "<html><body>Gateway error</body></html>")))
        case "no-compatible-stream":
            // A server with no way to deliver the item to this client (its profile names no
            // transcode the server can make): PlaybackInfo's ErrorCode.
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string:
                #"{"MediaSources":[{"Id":"x","SupportsDirectPlay":false,"SupportsDirectStream":false,"SupportsTranscoding":false}],"PlaySessionId":"p","ErrorCode":"NoCompatibleStream"}"#)))
        case "status-500":
            headers[.contentType] = "text/plain"
            return Response(status: .internalServerError, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: "boom")))
        case "unknown-enums":
            // Values a newer server might send: an item kind, a video range, a stream type, a
            // location type and a media type that 10.11's spec does not list.
            let item = #"{"Name":"From The Future","ServerId":"0","Id":"fedcba9876543210fedcba9876543210","Type":"HolographicMovie","IsFolder":false,"LocationType":"Orbital","MediaType":"Hologram","DateCreated":"2031-01-01T00:00:00.0000000Z","PremiereDate":"2031-01-01T00:00:00Z","MediaStreams":[{"Type":"Video","Codec":"h267","VideoRange":"HDR","VideoRangeType":"DOVIWithSomethingNew","Index":0},{"Type":"Lidar","Index":1}],"UserData":{"Played":false,"IsFavorite":false,"PlaybackPositionTicks":0,"PlayCount":0,"Key":"k","ItemId":"fedcba9876543210fedcba9876543210"}}"#
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"Items":[\#(item),\#(itemJSON)],"TotalRecordCount":2,"StartIndex":0}"#)))
        case "huge":
            // An endless array, chunked, with no length: the client must stop reading at its bound.
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                try await writer.write(ByteBuffer(string: #"{"Items":["#))
                let chunk = ByteBuffer(string: String(repeating: itemJSON + ",", count: 512))
                for _ in 0..<8192 { try await writer.write(chunk) }   // ~470 MB unless the client hangs up first
                try await writer.write(ByteBuffer(string: "\(itemJSON)],\"TotalRecordCount\":1}"))
                try await writer.finish(nil)
            })
        case "huge-declared":
            // A Content-Length far beyond any bound, then little data: refused before reading.
            headers[.contentLength] = String(4 << 30)
            return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: 4 << 30) { writer in
                try await writer.write(ByteBuffer(string: #"{"Items":["#))
                try await Task.sleep(for: .seconds(30))
                try await writer.finish(nil)
            })
        case "cut-half", "lie-size":
            // A download that breaks: the file's first half and then the connection drops
            // (cut-half), or the whole file under a Content-Length 1000 bytes too long (lie-size).
            let parts = path.split(separator: "/")
            guard parts.count == 3, (parts[0] == "Items" && parts[2] == "Download") || (parts[0] == "Videos" && parts[2] == "stream.mp4"),
                  let item = api.library.item(String(parts[1])),
                  let file = item.entry?.path, let bytes = FileManager.default.contents(atPath: api.library.mediaDirectory + "/" + file) else {
                return Response(status: .notFound)
            }
            if parts[2] == "stream.mp4" {
                // A transcode streamed with no length that stops half way: the connection drops
                // before the chunked body's end.
                headers[.contentType] = "video/mp4"
                return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                    try await writer.write(ByteBuffer(bytes: bytes.prefix(bytes.count / 2)))
                    throw CancellationError()
                })
            }
            headers[.contentType] = "application/octet-stream"
            let cut = mode == "cut-half"
            let declared = bytes.count + (cut ? 0 : 1000)
            headers[.contentLength] = String(declared)
            return Response(status: .ok, headers: headers, body: ResponseBody(contentLength: declared) { writer in
                try await writer.write(ByteBuffer(bytes: cut ? bytes.prefix(bytes.count / 2) : bytes[...]))
                throw CancellationError()   // the connection drops short of the length announced
            })
        default:
            headers[.contentType] = "text/plain"
            return Response(status: .badRequest, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: "unknown fault mode \(mode)")))
        }
    }
}
