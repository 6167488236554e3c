import Foundation
import Testing
@testable import Jellyfin

/// The device profile built from a player's decoders, and the stream chosen from a PlaybackInfo
/// answer (canned answers shaped as a 10.11 server writes them; the live path against the
/// stand-in is in IntegrationTests/JellyfinPlaybackTests).
struct PlaybackPlanTests {
    typealias CannedTransport = GeneratedLayerTests.CannedTransport

    static let mpvVideoListing = """
        Video decoders:
            h264 - H.264 / AVC / MPEG-4 AVC / MPEG-4 part 10
            hevc - HEVC (High Efficiency Video Coding)
            libdav1d (av1) - dav1d AV1 decoder by VideoLAN
            vp9 - Google VP9
            mjpeg - MJPEG (Motion JPEG)
        """
    static let mpvAudioListing = """
        Audio decoders:
            aac - AAC (Advanced Audio Coding)
            aac_fixed (aac) - AAC (Advanced Audio Coding)
            dca (dts) - DCA (DTS Coherent Acoustics)
            flac - FLAC (Free Lossless Audio Codec)
            opus - Opus
        """

    @Test func decodersAreReadFromMPVsListings() {
        #expect(LocalDecoders.codecs(inMPVListing: Self.mpvVideoListing) == ["h264", "hevc", "av1", "vp9", "mjpeg"])
        #expect(LocalDecoders.codecs(inMPVListing: Self.mpvAudioListing) == ["aac", "dts", "flac", "opus"])
        #expect(LocalDecoders.codecs(inMPVListing: "") == [])
        #expect(LocalDecoders.codecs(inMPVListing: "garbage\n    no dash here\n\u{0}\u{1}") == [])
    }

    @Test func theProfileListsOnlyWhatThePlayerDecodes() {
        let decoders = LocalDecoders(video: ["h264", "vp9", "mjpeg"], audio: ["aac", "opus"])
        let profile = DeviceProfile(name: "test", decoders: decoders, quality: .medium)
        let video = profile.directPlay.first { $0.kind == .video }
        #expect(video?.videoCodecs == ["h264", "vp9"])          // mjpeg is no codec a profile names
        #expect(video?.audioCodecs == ["aac", "opus"])
        #expect(video?.containers.contains("mkv") == true && video?.containers.contains("mp4") == true)
        #expect(profile.maxStreamingBitrate == 8_000_000)
        // HLS transcodes only in codecs it decodes: H.264 (no HEVC here) with AAC.
        let hls = profile.transcoding.first { $0.delivery == .hls }
        #expect(hls?.videoCodecs == ["h264"] && hls?.audioCodecs == ["aac"])
        #expect(DeviceProfile(name: "t", decoders: decoders, quality: .low, maxBitrate: 1_500_000).maxStreamingBitrate == 1_500_000)
        #expect(DeviceProfile(name: "t", decoders: decoders).maxStreamingBitrate == nil)
        // Without any video decoder there is no video transcode to ask for.
        #expect(DeviceProfile(name: "t", decoders: LocalDecoders(video: [], audio: ["mp3"])).transcoding.allSatisfy { $0.kind == .audio })
    }

    @Test func theProfileIsStatedInTheAPIsTerms() throws {
        let profile = DeviceProfile(name: "test", decoders: LocalDecoders(video: ["h264", "hevc"], audio: ["aac", "ac3"]), quality: .high)
        let data = try JSONEncoder().encode(profile.generated)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["MaxStreamingBitrate"] as? Int == 20_000_000)
        let direct = try #require(object["DirectPlayProfiles"] as? [[String: Any]])
        #expect(direct.first?["Type"] as? String == "Video")
        #expect(direct.first?["VideoCodec"] as? String == "h264,hevc")
        #expect(direct.first?["AudioCodec"] as? String == "aac,ac3")
        let transcoding = try #require(object["TranscodingProfiles"] as? [[String: Any]])
        #expect(transcoding.first?["Protocol"] as? String == "hls" && transcoding.first?["Context"] as? String == "Streaming")
        #expect(transcoding.first?["MaxAudioChannels"] as? String == "6")
        let condition = try #require((object["CodecProfiles"] as? [[String: Any]])?.first?["Conditions"] as? [[String: Any]])
        #expect(condition.first?["Condition"] as? String == "LessThanEqual" && condition.first?["Property"] as? String == "AudioChannels")
        #expect((object["SubtitleProfiles"] as? [[String: Any]])?.contains { $0["Format"] as? String == "srt" && $0["Method"] as? String == "External" } == true)
    }

    static let item = JellyfinItem(id: "0123456789abcdef0123456789abcdef", name: "Test Pattern", kind: .movie)
    static let request = PlaybackRequest(profile: DeviceProfile(name: "t", decoders: LocalDecoders(video: ["h264"], audio: ["aac"])))

    func plan(_ json: String) async throws(JellyfinError) -> PlaybackPlan {
        let transport = CannedTransport(json: json)
        let session = try! GeneratedLayerTests().session(transport)
        return try await session.playbackPlan(for: Self.item, Self.request)
    }

    @Test func directPlayOpensTheFileWithTheTokenAndPlaySession() async throws {
        let plan = try await plan("""
            {"MediaSources":[{"Id":"src1","Container":"mp4","SupportsDirectPlay":true,"SupportsDirectStream":true,"SupportsTranscoding":true,
              "RunTimeTicks":20000000,"DefaultAudioStreamIndex":1,"ETag":"e1","Protocol":"File","Type":"Default","MediaStreams":[]}],
             "PlaySessionId":"ps1"}
            """)
        #expect(plan.method == .directPlay)
        #expect(plan.mediaSourceId == "src1" && plan.playSessionId == "ps1")
        #expect(plan.runtimeSeconds == 2 && plan.audioStreamIndex == 1 && plan.container == "mp4")
        let components = try #require(URLComponents(url: plan.url, resolvingAgainstBaseURL: false))
        #expect(components.host == "jellyfin.test" && components.path == "/jf/Videos/0123456789abcdef0123456789abcdef/stream")
        let query = Dictionary(uniqueKeysWithValues: (components.queryItems ?? []).map { ($0.name, $0.value ?? "") })
        #expect(query == ["static": "true", "mediaSourceId": "src1", "deviceId": "d1", "playSessionId": "ps1", "tag": "e1", "ApiKey": "tok"])
    }

    @Test func aTranscodeOpensTheServersURL() async throws {
        let plan = try await plan("""
            {"MediaSources":[{"Id":"src1","Container":"mkv","SupportsDirectPlay":false,"SupportsDirectStream":false,"SupportsTranscoding":true,
              "TranscodingUrl":"/videos/0123/master.m3u8?MediaSourceId=src1&PlaySessionId=ps2&ApiKey=tok&TranscodeReasons=VideoCodecNotSupported",
              "TranscodingSubProtocol":"hls","TranscodingContainer":"mp4"}],"PlaySessionId":"ps2"}
            """)
        #expect(plan.method == .transcode)
        #expect(plan.url.absoluteString == "http://jellyfin.test:8096/jf/videos/0123/master.m3u8?MediaSourceId=src1&PlaySessionId=ps2&ApiKey=tok&TranscodeReasons=VideoCodecNotSupported")
    }

    @Test func noStreamIsATypedErrorWithTheServersCode() async {
        let cases: [(String, String)] = [
            (#"{"MediaSources":[{"Id":"s","SupportsDirectPlay":false,"SupportsDirectStream":false,"SupportsTranscoding":false}],"ErrorCode":"NoCompatibleStream"}"#,
             "the server has no stream this player can play (NoCompatibleStream)"),
            (#"{"MediaSources":[],"ErrorCode":"NotAllowed"}"#, "this user may not play it (NotAllowed)"),
            (#"{"MediaSources":[]}"#, "the server lists no media source for it"),
            (#"{"ErrorCode":"SomethingNew"}"#, "the server refused (SomethingNew)"),
        ]
        for (json, reason) in cases {
            await #expect(throws: JellyfinError.noPlayableStream(item: "Test Pattern", reason: reason)) { _ = try await plan(json) }
        }
    }

    @Test func aBrokenAnswerIsMalformedNotACrash() async {
        for json in [#"{"MediaSources":"#, #"{"MediaSources":[{"SupportsDirectPlay":"yes"}]}"#, "[]", "null"] {
            do {
                _ = try await plan(json)
                Issue.record("\(json) gave a plan")
            } catch {
                guard case .malformedResponse = error else { Issue.record("\(json): \(error)"); continue }
            }
        }
    }
}
