public import Foundation
internal import OpenAPIRuntime

/// `MediaSegmentType`: what a stretch of an item is (`Intro`, `Outro`, `Recap`, `Preview`,
/// `Commercial`, `Unknown`, or what a newer server adds).
public struct MediaSegmentType: OpenString {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let intro: Self = "Intro"
    public static let outro: Self = "Outro"
    public static let recap: Self = "Recap"
    public static let preview: Self = "Preview"
    public static let commercial: Self = "Commercial"
    public static let known: [Self] = [.intro, .outro, .recap, .preview, .commercial]

    /// A type named by a person (`intro`, `credits` for the outro), or nil.
    public init?(named name: String) {
        let name = name.lowercased()
        if name == "credits" { self = .outro; return }
        guard let known = Self.known.first(where: { $0.rawValue.lowercased() == name }) else { return nil }
        self = known
    }
}

/// A stretch of an item a player may skip (10.10+ servers, from plugins such as intro skippers).
public struct MediaSegment: Sendable, Hashable {
    public var type: MediaSegmentType
    public var startSeconds: Double
    public var endSeconds: Double

    public init(type: MediaSegmentType, startSeconds: Double, endSeconds: Double) {
        (self.type, self.startSeconds, self.endSeconds) = (type, startSeconds, endSeconds)
    }
}

/// An audio item's lyrics: lines with their start (synced lyrics) or without (plain text).
public struct Lyrics: Sendable, Hashable {
    public struct Line: Sendable, Hashable {
        /// Seconds from the start of the track; nil for unsynced lyrics.
        public var startSeconds: Double?
        public var text: String
    }

    public var isSynced: Bool
    public var lines: [Line]
    public var artist: String?
    public var title: String?
}

extension JellyfinSession {
    /// The item's media segments, in time order (none when the server keeps none for it; a
    /// server older than 10.10 has no such call and answers 404, which is none too).
    public func mediaSegments(_ itemId: String, types: [MediaSegmentType] = []) async throws(JellyfinError) -> [MediaSegment] {
        let operation = "read the media segments of \(itemId)"
        let output = try await perform(operation) {
            try await client.getItemSegments(path: .init(itemId: itemId),
                                             query: .init(includeSegmentTypes: types.isEmpty ? nil : types.map(\.rawValue)))
        }
        switch output {
        case .ok(let ok):
            let result = try await perform(operation) { try ok.body.json }
            return (result.items ?? []).compactMap { dto -> MediaSegment? in
                guard let start = dto.startTicks, let end = dto.endTicks, end > start else { return nil }
                return MediaSegment(type: MediaSegmentType(rawValue: dto._type?.value1 ?? "Unknown"),
                                    startSeconds: Double(start) / 10_000_000, endSeconds: Double(end) / 10_000_000)
            }.sorted { $0.startSeconds < $1.startSeconds }
        case .notFound: return []
        default: throw failure(operation, output)
        }
    }

    /// An audio item's lyrics; nil when it has none.
    public func lyrics(_ itemId: String) async throws(JellyfinError) -> Lyrics? {
        let operation = "read the lyrics of \(itemId)"
        let output = try await perform(operation) { try await client.getLyrics(path: .init(itemId: itemId)) }
        switch output {
        case .ok(let ok):
            let dto = try await perform(operation) { try ok.body.json }
            let metadata = dto.metadata?.value1
            let synced = metadata?.isSynced ?? false
            let offset = Double(metadata?.offset ?? 0) / 10_000_000
            let lines = (dto.lyrics ?? []).map { line in
                Lyrics.Line(startSeconds: synced ? line.start.map { Double($0) / 10_000_000 + offset } : nil, text: line.text ?? "")
            }
            return Lyrics(isSynced: synced, lines: lines, artist: metadata?.artist, title: metadata?.title)
        case .notFound: return nil
        default: throw failure(operation, output)
        }
    }
}
