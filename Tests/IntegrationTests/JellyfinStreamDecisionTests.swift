import Foundation
import Testing

/// The stand-in decides playback as a real Jellyfin server does: every case of the server's own
/// StreamBuilder tests (re-expressed as facts in Fixtures/stream-decisions.json: the profile and
/// source a case uses, what the server answers) is put to the stand-in's decision
/// (`POST /StandIn/Decide`, the code PlaybackInfo runs) and checked as the upstream test checks
/// it: the play method, the transcode reasons exactly, the container and protocol of a
/// transcode, whether the video and audio can be copied, the streams kept. A table of every case
/// that differs is printed with what differs.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct JellyfinStreamDecisionTests {
    struct Fixture: Decodable {
        var video: [VideoCase]
        var subtitles: [SubtitleCase]
        var profiles: [String: JSONValue]
        var sources: [String: JSONValue]
    }

    struct VideoCase: Decodable {
        var test: String
        var profile: String
        var source: String
        var method: String?
        var reasons: [String]
        var mode: String?
        var `protocol`: String?
        var audioStreamIndex: Int?
        var subtitleStreamIndex: Int?
        var subtitleOverride: [String: JSONValue]?
        var subtitleProfiles: [JSONValue]?
        var subtitleDelivery: String?
        var videoCodecsInclude: String?
        var audioCodecsInclude: String?
    }

    struct SubtitleCase: Decodable {
        var test: String
        var codec: String
        var external: Bool
        var path: String?
        var language: String?
        var supportsExternalStream: Bool
        var canExtract: Bool
        var playMethod: String
        var container: String?
        var `protocol`: String?
        var profiles: [JSONValue]
        var expect: String
    }

    struct Answer: Decodable {
        var PlayMethod: String
        var TranscodeReasons: [String]
        var Container: String?
        var SubProtocol: String
        var AudioStreamIndex: Int?
        var SubtitleStreamIndex: Int?
        var VideoCodecs: [String]
        var AudioCodecs: [String]
        var TranscodingMaxAudioChannels: Int?
        var AudioChannels: Int?
        var SubtitleDeliveryMethod: String?
    }

    static func fixture() throws -> Fixture {
        let url = packageRoot.appendingPathComponent("Tests/IntegrationTests/Fixtures/stream-decisions.json")
        return try JSONDecoder().decode(Fixture.self, from: Data(contentsOf: url))
    }

    /// The source with the case's changes: the last stream (a subtitle) made what the case says.
    static func source(_ fixture: Fixture, _ c: VideoCase) throws -> [String: Any] {
        var source = try #require(fixture.sources[c.source]?.any as? [String: Any], "source \(c.source)")
        if let override = c.subtitleOverride, var streams = source["MediaStreams"] as? [[String: Any]], var last = streams.popLast() {
            for (key, value) in override { last[key] = value.any }
            last.removeValue(forKey: "Path")
            source["MediaStreams"] = streams + [last]
        }
        return source
    }

    /// What differs between the stand-in's answer and the server's, as the upstream test checks it.
    static func differences(_ c: VideoCase, source: [String: Any], answer a: Answer) -> [String] {
        var wrong: [String] = []
        let expected = Set(c.reasons), got = Set(a.TranscodeReasons)
        if let method = c.method, a.PlayMethod != method { wrong.append("method \(a.PlayMethod), not \(method)") }
        if expected != got {
            wrong.append("reasons [\(got.sorted().joined(separator: ","))], not [\(expected.sorted().joined(separator: ","))]")
        }
        let streams = source["MediaStreams"] as? [[String: Any]] ?? []
        let videoCodec = (streams.first { $0["Type"] as? String == "Video" }?["Codec"] as? String)?.lowercased()
        let target = streams.first { $0["Type"] as? String == "Audio" && ($0["Index"] as? Int) == a.AudioStreamIndex }
        let targetCodec = (target?["Codec"] as? String)?.lowercased()
        let targetInternal = target?["IsExternal"] as? Bool != true
        let videoCodecs = a.VideoCodecs.map { $0.lowercased() }, audioCodecs = a.AudioCodecs.map { $0.lowercased() }
        if let asked = c.audioStreamIndex, a.AudioStreamIndex != asked, c.subtitleOverride == nil {
            wrong.append("audio stream \(a.AudioStreamIndex.map(String.init) ?? "none"), not the \(asked) asked for")
        }
        if let asked = c.subtitleStreamIndex, a.SubtitleStreamIndex != asked {
            wrong.append("subtitle stream \(a.SubtitleStreamIndex.map(String.init) ?? "none"), not the \(asked) asked for")
        }
        switch c.method {
        case "DirectPlay":
            let names = ((source["Container"] as? String) ?? "").split(separator: ",").map { $0.lowercased() }
            if !names.contains((a.Container ?? "").lowercased()) { wrong.append("container \(a.Container ?? "none") is not the source's") }
            if let videoCodec, videoCodecs != [videoCodec] { wrong.append("video \(videoCodecs), not [\(videoCodec)]") }
            if let targetCodec, audioCodecs != [targetCodec] { wrong.append("audio \(audioCodecs), not [\(targetCodec)]") }
        case "Transcode":
            guard a.Container != nil, !videoCodecs.isEmpty, !audioCodecs.isEmpty else {
                wrong.append("a transcode with no container or codecs (\(a.Container ?? "none"), \(videoCodecs), \(audioCodecs))")
                break
            }
            if let asked = c.protocol {
                let (container, subProtocol): (String?, String) = switch asked {
                case "http": (nil, "http")
                case "HLS.mp4": ("mp4", "hls")
                default: ("ts", "hls")
                }
                if a.SubProtocol != subProtocol || (container != nil && a.Container != container) {
                    wrong.append("output \(a.Container ?? "none")/\(a.SubProtocol), not \(container ?? "any")/\(subProtocol)")
                }
            }
            switch c.mode {
            case "Transcode":
                let excused = !expected.isDisjoint(with: ["ContainerNotSupported", "ContainerBitrateExceedsLimit", "DirectPlayError", "VideoRangeTypeNotSupported"])
                if !excused, let videoCodec, videoCodecs.contains(videoCodec) { wrong.append("the video (\(videoCodec)) could be copied, not re-encoded") }
            case "DirectStream", "Remux":
                if let videoCodec, !videoCodecs.contains(videoCodec) { wrong.append("the video (\(videoCodec)) cannot be copied (\(videoCodecs))") }
                if c.mode == "Remux", let targetCodec, audioCodecs != [targetCodec] { wrong.append("audio \(audioCodecs) is not the copied [\(targetCodec)]") }
                if c.mode == "DirectStream", targetInternal, let targetCodec {
                    if expected.contains("AudioChannelsNotSupported") {
                        if a.AudioChannels != a.TranscodingMaxAudioChannels { wrong.append("audio channels \(a.AudioChannels ?? 0), not the \(a.TranscodingMaxAudioChannels ?? 0) the transcode allows") }
                    } else if audioCodecs.contains(targetCodec) {
                        wrong.append("the audio (\(targetCodec)) could be copied, not re-encoded (\(audioCodecs))")
                    }
                }
            default: break
            }
            if expected.contains("AudioCodecNotSupported"), targetInternal, let targetCodec, audioCodecs.contains(targetCodec) {
                wrong.append("the audio codec \(targetCodec) was refused yet is among the output's \(audioCodecs)")
            }
        default:
            if a.SubProtocol != "http" || a.Container != nil { wrong.append("output \(a.Container ?? "none")/\(a.SubProtocol), not a plain stream") }
        }
        if let delivery = c.subtitleDelivery, a.SubtitleDeliveryMethod != delivery { wrong.append("subtitles \(a.SubtitleDeliveryMethod ?? "none"), not \(delivery)") }
        if let codec = c.videoCodecsInclude, !videoCodecs.contains(codec) { wrong.append("\(codec) not among the video codecs \(videoCodecs)") }
        if let codec = c.audioCodecsInclude, !audioCodecs.contains(codec) { wrong.append("\(codec) not among the audio codecs \(audioCodecs)") }
        return wrong
    }

    @Test func everyStreamBuilderCaseIsDecidedAsTheServerDecidesIt() throws {
        let fixture = try Self.fixture()
        #expect(fixture.video.count + fixture.subtitles.count == 307, "the upstream tests hold 307 cases")
        let server = try JellyfinStandInServer(privateData: true)
        var rows: [String] = []
        for (n, c) in fixture.video.enumerated() {
            var profile = try #require(fixture.profiles[c.profile]?.any as? [String: Any], "profile \(c.profile)")
            if let subtitles = c.subtitleProfiles { profile["SubtitleProfiles"] = subtitles.map(\.any) }
            let source = try Self.source(fixture, c)
            var request: [String: Any] = ["Profile": profile, "Source": source, "EnableDirectStream": false, "CanExtractSubtitles": false]
            if let index = c.audioStreamIndex { request["AudioStreamIndex"] = index }
            if let index = c.subtitleStreamIndex { request["SubtitleStreamIndex"] = index }
            let body = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
            let answer = try JSONDecoder().decode(Answer.self, from: Data(try server.hook("/StandIn/Decide", body: body).utf8))
            let wrong = Self.differences(c, source: source, answer: answer)
            if !wrong.isEmpty { rows.append("| \(n + 1) | \(c.test) | \(c.profile) | \(c.source) | \(wrong.joined(separator: "; ")) |") }
        }
        for (n, c) in fixture.subtitles.enumerated() {
            var stream: [String: Any] = ["Type": "Subtitle", "Index": 0, "Codec": c.codec, "IsExternal": c.external,
                                         "SupportsExternalStream": c.supportsExternalStream]
            if let path = c.path { stream["Path"] = path }
            if let language = c.language { stream["Language"] = language }
            var request: [String: Any] = ["Stream": stream, "Profiles": c.profiles.map(\.any), "PlayMethod": c.playMethod, "CanExtract": c.canExtract]
            if let container = c.container { request["Container"] = container }
            if let subProtocol = c.protocol { request["SubProtocol"] = subProtocol }
            let body = String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self)
            let method = try server.hook("/StandIn/Decide/Subtitle", body: body)
            if method != c.expect {
                rows.append("| \(fixture.video.count + n + 1) | \(c.test) | — | \(c.codec) \(c.external ? "external" : "internal") \(c.playMethod) | subtitles \(method), not \(c.expect) |")
            }
        }
        let total = fixture.video.count + fixture.subtitles.count
        print("StreamBuilder cases: \(total - rows.count) of \(total) decided as the server decides them")
        if !rows.isEmpty {
            print((["| # | test | profile | source | what differs |", "|---|---|---|---|---|"] + rows).joined(separator: "\n"))
        }
        #expect(rows.isEmpty, "\(rows.count) of \(total) cases differ from the server (table above)")
    }

    /// PlaybackInfo answers with that decision: a Matroska episode on the Chrome profile (which
    /// takes no Matroska) is remuxed when direct stream is allowed and, when it is not, goes to
    /// HLS fMP4 with the video kept — each with ContainerNotSupported, as a real server says.
    @Test func playbackInfoAnswersWithTheServersDecision() throws {
        let fixture = try Self.fixture()
        let server = try JellyfinStandInServer(privateData: true)
        let token = try JellyfinStandInConformanceTests().token(server)
        let listing = try server.get("/Items?recursive=true&includeItemTypes=Episode&searchTerm=Pilot&ApiKey=\(token)")
        let id = try #require(((try JSONSerialization.jsonObject(with: Data(listing.body.utf8)) as? [String: Any])?["Items"] as? [[String: Any]])?.first?["Id"] as? String)
        let profile = try #require(fixture.profiles["Chrome"]?.any)
        let curl = try requireExecutable("curl", package: "curl")
        func ask(directStream: Bool) throws -> [String: Any] {
            let body = String(decoding: try JSONSerialization.data(withJSONObject: ["DeviceProfile": profile, "EnableDirectStream": directStream]), as: UTF8.self)
            let result = try run(curl, ["-sS", "-X", "POST", "http://127.0.0.1:\(server.port)/Items/\(id)/PlaybackInfo?ApiKey=\(token)",
                                        "-H", "Content-Type: application/json", "--data-binary", body], timeout: 20)
            let answer = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            return try #require((answer?["MediaSources"] as? [[String: Any]])?.first, "\(result.stdout)")
        }
        let remux = try ask(directStream: true)
        #expect(remux["SupportsDirectPlay"] as? Bool == false && remux["SupportsDirectStream"] as? Bool == true && remux["TranscodingUrl"] == nil)
        let transcode = try ask(directStream: false)
        #expect(transcode["SupportsDirectStream"] as? Bool == false && transcode["TranscodingSubProtocol"] as? String == "hls")
        let url = try #require(transcode["TranscodingUrl"] as? String)
        #expect(url.contains("/master.m3u8") && url.contains("TranscodeReasons=ContainerNotSupported&") && url.contains("VideoCodec=av1,hevc,h264,vp9"), "\(url)")
        let decisions = try JellyfinPlaybackTests.reports(server).filter { $0.kind == "decision" }
        #expect(decisions.map { $0.playMethod ?? "" } == ["DirectStream", "Transcode"])
        #expect(decisions.allSatisfy { $0.reasons == ["ContainerNotSupported"] }, "\(decisions.map { $0.reasons ?? [] })")
    }
}

/// Any JSON value, kept as it came (the fixture's profiles and sources pass through to the hook).
enum JSONValue: Decodable {
    case object([String: JSONValue]), array([JSONValue]), string(String), number(Double), integer(Int), bool(Bool), null

    init(from decoder: any Decoder) throws {
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { self = .null }
        else if let value = try? single.decode(Bool.self) { self = .bool(value) }
        else if let value = try? single.decode(Int.self) { self = .integer(value) }
        else if let value = try? single.decode(Double.self) { self = .number(value) }
        else if let value = try? single.decode(String.self) { self = .string(value) }
        else if let value = try? single.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try single.decode([String: JSONValue].self)) }
    }

    var any: Any {
        switch self {
        case .object(let object): return object.mapValues(\.any)
        case .array(let array): return array.map(\.any)
        case .string(let text): return text
        case .number(let number): return number
        case .integer(let number): return number
        case .bool(let flag): return flag
        case .null: return NSNull()
        }
    }
}
