internal import Foundation

/// Reads a listing page (`BaseItemDtoQueryResult`) straight into `JellyfinItem`s.
///
/// Listing is the one hot path of a media client: a library of 20,000 items is 14 MB of JSON.
/// The generated `BaseItemDto` decoder spent 80 % of a listing's time (measured with
/// `scripts/bench jellyfin` and perf): about 150 optional keys per item, a keyed dictionary per
/// object in Foundation's decoder, and a set of every known key built per item to refuse
/// unknown ones. This reader walks the bytes once, keeps the fields `JellyfinItem` has and skips
/// the rest without building anything.
///
/// It reads what the generated layer reads, into the same values (the tests compare both on the
/// same pages): the same integer widths (a `ProductionYear` beyond Int32 is an error in both),
/// `CommunityRating` as a Double (the generator copy widens the spec's floats), dates through
/// `JellyfinDateTranscoder`, `null` as absent. Keys it does not keep are checked for JSON syntax
/// only, so a newer server's new fields and values never fail a page. Malformed input is a
/// `ItemListDecoder.Failure` naming the byte offset and what was expected; nesting is bounded.
struct ItemListDecoder {
    struct Failure: Error, Equatable, CustomStringConvertible {
        var offset: Int
        var reason: String
        var description: String { "\(reason) at byte \(offset)" }
    }

    /// Objects and arrays nested deeper than this are refused (a hostile `[[[[…` cannot exhaust the stack).
    static let maximumDepth = 64

    struct Page {
        var items: [JellyfinItem]
        var startIndex: Int?
        var total: Int?
    }

    static func decodePage(_ bytes: [UInt8]) throws(Failure) -> Page {
        let result = bytes.withUnsafeBytes { buffer in Result { () throws(Failure) in try decodePage(buffer) } }
        return try result.get()
    }

    static func decodePage(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> Page {
        var reader = JSONReader(bytes)
        var items: [JellyfinItem] = []
        var startIndex: Int?
        var total: Int?
        try reader.object { reader, key throws(Failure) in
            switch key {
            case .items:
                guard try !reader.null() else { return }
                try reader.array { reader throws(Failure) in items.append(try item(&reader)) }
            case .totalRecordCount: total = try reader.int32().map(Int.init)
            case .startIndex: startIndex = try reader.int32().map(Int.init)
            default: try reader.skip()
            }
        }
        try reader.end()
        return Page(items: items, startIndex: startIndex, total: total)
    }

    private static func item(_ reader: inout JSONReader) throws(Failure) -> JellyfinItem {
        // A null in place of an item is refused (as by the generated decoder): skipping it would
        // shift the paging, which advances by the items a page holds.
        var item = JellyfinItem(id: "", name: "", kind: ItemKind(rawValue: ""))
        try reader.object { reader, key throws(Failure) in
            switch key {
            case .id: item.id = try reader.string() ?? ""
            case .name: item.name = try reader.string() ?? ""
            case .type: item.kind = ItemKind(rawValue: try reader.string() ?? "")
            case .serverId: item.serverId = try reader.string()
            case .parentId: item.parentId = try reader.string()
            case .isFolder: item.isFolder = try reader.bool() ?? false
            case .collectionType: item.collectionType = try reader.string()
            case .seriesName: item.seriesName = try reader.string()
            case .seriesId: item.seriesId = try reader.string()
            case .seasonId: item.seasonId = try reader.string()
            case .seasonName: item.seasonName = try reader.string()
            case .album: item.album = try reader.string()
            case .albumId: item.albumId = try reader.string()
            case .albumArtist: item.albumArtist = try reader.string()
            case .artists: item.artists = try reader.strings()
            case .indexNumber: item.indexNumber = try reader.int32().map(Int.init)
            case .parentIndexNumber: item.parentIndexNumber = try reader.int32().map(Int.init)
            case .productionYear: item.productionYear = try reader.int32().map(Int.init)
            case .premiereDate: item.premiereDate = try reader.date()
            case .dateCreated: item.dateCreated = try reader.date()
            case .runTimeTicks: item.runTimeTicks = try reader.int64()
            case .overview: item.overview = try reader.string()
            case .genres: item.genres = try reader.strings()
            case .officialRating: item.officialRating = try reader.string()
            case .communityRating: item.communityRating = try reader.double()
            case .childCount: item.childCount = try reader.int32().map(Int.init)
            case .container: item.container = try reader.string()
            case .mediaType: item.mediaType = try reader.string()
            case .path: item.path = try reader.string()
            case .userData: item.userData = try userData(&reader)
            case .imageTags: item.imageTags = try reader.stringMap() ?? [:]
            case .backdropImageTags: item.backdropImageTags = try reader.strings()
            case .imageBlurHashes: item.imageBlurHashes = try blurHashes(&reader)
            case .mediaStreams: item.mediaStreams = try mediaStreams(&reader)
            default: try reader.skip()
            }
        }
        // As the generated conversion does: the first backdrop also answers to "Backdrop".
        if item.imageTags["Backdrop"] == nil, let first = item.backdropImageTags.first { item.imageTags["Backdrop"] = first }
        return item
    }

    private static func userData(_ reader: inout JSONReader) throws(Failure) -> UserItemData? {
        guard try !reader.null() else { return nil }
        var data = UserItemData()
        try reader.object { reader, key throws(Failure) in
            switch key {
            case .played: data.played = try reader.bool() ?? false
            case .isFavorite: data.isFavorite = try reader.bool() ?? false
            case .playbackPositionTicks: data.playbackPositionTicks = try reader.int64() ?? 0
            case .playCount: data.playCount = try reader.int32().map(Int.init) ?? 0
            case .lastPlayedDate: data.lastPlayedDate = try reader.date()
            case .unplayedItemCount: data.unplayedItemCount = try reader.int32().map(Int.init)
            default: try reader.skip()
            }
        }
        return data
    }

    /// The image types the spec names; others a newer server sends are skipped.
    private static let blurHashTypes: Set<String> = ["Primary", "Art", "Backdrop", "Banner", "Logo", "Thumb", "Disc", "Box",
                                                     "Screenshot", "Chapter", "Menu", "Profile", "BoxRear"]

    private static func blurHashes(_ reader: inout JSONReader) throws(Failure) -> [String: [String: String]] {
        guard try !reader.null() else { return [:] }
        var result: [String: [String: String]] = [:]
        try reader.map { reader, type throws(Failure) in
            if blurHashTypes.contains(type) {
                if let map = try reader.stringMap(), !map.isEmpty { result[type] = map }
            } else {
                try reader.skip()
            }
        }
        return result
    }

    private static func mediaStreams(_ reader: inout JSONReader) throws(Failure) -> [MediaStreamInfo] {
        guard try !reader.null() else { return [] }
        var streams: [MediaStreamInfo] = []
        try reader.array { reader throws(Failure) in
            var stream = MediaStreamInfo(type: "")
            if try !reader.null() {
                try reader.object { reader, key throws(Failure) in
                    switch key {
                    case .index: stream.index = try reader.int32().map(Int.init)
                    case .type: stream.type = try reader.string() ?? ""
                    case .codec: stream.codec = try reader.string()
                    case .language: stream.language = try reader.string()
                    case .width: stream.width = try reader.int32().map(Int.init)
                    case .height: stream.height = try reader.int32().map(Int.init)
                    case .channels: stream.channels = try reader.int32().map(Int.init)
                    case .sampleRate: stream.sampleRate = try reader.int32().map(Int.init)
                    case .bitRate: stream.bitRate = try reader.int32().map(Int.init)
                    case .videoRangeType: stream.videoRangeType = try reader.string().map { VideoRangeType(rawValue: $0) }
                    case .isDefault: stream.isDefault = try reader.bool() ?? false
                    case .title: stream.title = try reader.string()
                    case .isExternal: stream.isExternal = try reader.bool() ?? false
                    case .deliveryMethod: stream.deliveryMethod = try reader.string()
                    case .deliveryUrl: stream.deliveryUrl = try reader.string()
                    default: try reader.skip()
                    }
                }
            }
            streams.append(stream)
        }
        return streams
    }
}

/// The keys the listing reads, matched from the raw bytes without making a string.
enum ListingKey: Equatable {
    case items, totalRecordCount, startIndex
    case id, name, type, serverId, parentId, isFolder, collectionType, seriesName, seriesId, seasonId, seasonName, album, albumId,
         albumArtist, artists, indexNumber, parentIndexNumber, productionYear, premiereDate, dateCreated, runTimeTicks, overview, genres,
         officialRating, communityRating, childCount, container, mediaType, path, userData, imageTags, backdropImageTags,
         imageBlurHashes, mediaStreams
    case played, isFavorite, playbackPositionTicks, playCount, lastPlayedDate, unplayedItemCount
    case index, codec, language, width, height, channels, sampleRate, bitRate, videoRangeType, isDefault, title, isExternal,
         deliveryMethod, deliveryUrl
    case other

    private static let names: [(String, ListingKey)] = [
        ("Items", .items), ("TotalRecordCount", .totalRecordCount), ("StartIndex", .startIndex),
        ("Id", .id), ("Name", .name), ("Type", .type), ("ServerId", .serverId), ("ParentId", .parentId), ("IsFolder", .isFolder),
        ("CollectionType", .collectionType), ("SeriesName", .seriesName), ("SeriesId", .seriesId), ("SeasonId", .seasonId),
        ("SeasonName", .seasonName), ("Album", .album), ("AlbumId", .albumId), ("AlbumArtist", .albumArtist), ("Artists", .artists),
        ("IndexNumber", .indexNumber), ("ParentIndexNumber", .parentIndexNumber), ("ProductionYear", .productionYear),
        ("PremiereDate", .premiereDate), ("DateCreated", .dateCreated), ("RunTimeTicks", .runTimeTicks), ("Overview", .overview),
        ("Genres", .genres), ("OfficialRating", .officialRating), ("CommunityRating", .communityRating), ("ChildCount", .childCount),
        ("Container", .container), ("MediaType", .mediaType), ("Path", .path), ("UserData", .userData), ("ImageTags", .imageTags),
        ("BackdropImageTags", .backdropImageTags), ("ImageBlurHashes", .imageBlurHashes), ("MediaStreams", .mediaStreams),
        ("Played", .played), ("IsFavorite", .isFavorite), ("PlaybackPositionTicks", .playbackPositionTicks), ("PlayCount", .playCount),
        ("LastPlayedDate", .lastPlayedDate), ("UnplayedItemCount", .unplayedItemCount),
        ("Index", .index), ("Codec", .codec), ("Language", .language), ("Width", .width), ("Height", .height), ("Channels", .channels),
        ("SampleRate", .sampleRate), ("BitRate", .bitRate), ("VideoRangeType", .videoRangeType), ("IsDefault", .isDefault),
        ("Title", .title), ("IsExternal", .isExternal), ("DeliveryMethod", .deliveryMethod), ("DeliveryUrl", .deliveryUrl),
    ]

    /// The names by length: a key is compared only with the names as long as it is.
    private static let byLength: [[([UInt8], ListingKey)]] = {
        var table = [[([UInt8], ListingKey)]](repeating: [], count: 32)
        for (name, key) in names { table[name.utf8.count].append((Array(name.utf8), key)) }
        return table
    }()

    /// The key spelled by `bytes` (exactly, as the server writes PascalCase), or `.other`.
    static func match(_ bytes: UnsafeRawBufferPointer) -> ListingKey {
        guard bytes.count < byLength.count else { return .other }
        for (name, key) in byLength[bytes.count] where name.withUnsafeBytes({ memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }) {
            return key
        }
        return .other
    }
}

/// A forward-only reader over one JSON text (RFC 8259), strict about syntax, with typed errors.
struct JSONReader {
    private let bytes: UnsafeRawBufferPointer
    private(set) var position = 0
    private var depth = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    private func fail(_ reason: String) -> ItemListDecoder.Failure { .init(offset: position, reason: reason) }

    private mutating func skipSpace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func peek() throws(ItemListDecoder.Failure) -> UInt8 {
        skipSpace()
        guard position < bytes.count else { throw fail("the answer ends in the middle") }
        return bytes[position]
    }

    private mutating func expect(_ byte: UInt8, _ what: String) throws(ItemListDecoder.Failure) {
        guard try peek() == byte else { throw fail("expected \(what)") }
        position += 1
    }

    private mutating func literal(_ word: StaticString) throws(ItemListDecoder.Failure) {
        let n = word.utf8CodeUnitCount
        guard position + n <= bytes.count, memcmp(bytes.baseAddress! + position, word.utf8Start, n) == 0 else {
            throw fail("expected a JSON value")
        }
        position += n
    }

    /// Only whitespace may follow the value.
    mutating func end() throws(ItemListDecoder.Failure) {
        skipSpace()
        guard position == bytes.count else { throw fail("unexpected text after the JSON value") }
    }

    /// Consumes `null` if it is next.
    mutating func null() throws(ItemListDecoder.Failure) -> Bool {
        guard try peek() == 0x6E else { return false }
        try literal("null")
        return true
    }

    private mutating func enter() throws(ItemListDecoder.Failure) {
        depth += 1
        guard depth <= ItemListDecoder.maximumDepth else { throw fail("JSON nested deeper than \(ItemListDecoder.maximumDepth) levels") }
    }

    /// Calls `member` for each key of an object, positioned at its value (which it must consume).
    mutating func object(_ member: (inout JSONReader, ListingKey) throws(ItemListDecoder.Failure) -> Void) throws(ItemListDecoder.Failure) {
        try members { reader throws(ItemListDecoder.Failure) in
            let key = try reader.rawKey()
            try reader.expect(0x3A, "':' after a key")
            try member(&reader, key)
        }
    }

    /// The same for an object whose keys are data (image types, tags).
    mutating func map(_ member: (inout JSONReader, String) throws(ItemListDecoder.Failure) -> Void) throws(ItemListDecoder.Failure) {
        try members { reader throws(ItemListDecoder.Failure) in
            guard let key = try reader.string() else { throw reader.fail("expected a key in quotes") }
            try reader.expect(0x3A, "':' after a key")
            try member(&reader, key)
        }
    }

    private mutating func members(_ each: (inout JSONReader) throws(ItemListDecoder.Failure) -> Void) throws(ItemListDecoder.Failure) {
        try expect(0x7B, "an object")
        try enter()
        if try peek() == 0x7D {
            position += 1
            depth -= 1
            return
        }
        while true {
            guard try peek() == 0x22 else { throw fail("expected a key in quotes") }
            try each(&self)
            switch try peek() {
            case 0x2C: position += 1
            case 0x7D: position += 1; depth -= 1; return
            default: throw fail("expected ',' or '}' in an object")
            }
        }
    }

    /// A key matched against the listing's names without copying; keys with escapes are
    /// decoded first.
    private mutating func rawKey() throws(ItemListDecoder.Failure) -> ListingKey {
        let start = position + 1
        var i = start
        while i < bytes.count {
            let c = bytes[i]
            if c == 0x22 {
                position = i + 1
                return ListingKey.match(UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
            }
            if c == 0x5C || c < 0x20 { break }
            i += 1
        }
        var text = try string()!
        return text.withUTF8 { ListingKey.match(UnsafeRawBufferPointer($0)) }
    }

    /// Calls `element` for each element of an array, positioned at it.
    mutating func array(_ element: (inout JSONReader) throws(ItemListDecoder.Failure) -> Void) throws(ItemListDecoder.Failure) {
        try expect(0x5B, "an array")
        try enter()
        if try peek() == 0x5D {
            position += 1
            depth -= 1
            return
        }
        while true {
            try element(&self)
            switch try peek() {
            case 0x2C: position += 1
            case 0x5D: position += 1; depth -= 1; return
            default: throw fail("expected ',' or ']' in an array")
            }
        }
    }

    /// A string, or nil for `null`.
    mutating func string() throws(ItemListDecoder.Failure) -> String? {
        if try null() { return nil }
        try expect(0x22, "a string")
        let start = position
        // Fast path: no escapes.
        while position < bytes.count {
            let c = bytes[position]
            if c == 0x22 {
                defer { position += 1 }
                return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
            }
            if c == 0x5C { break }
            guard c >= 0x20 else { throw fail("a control character inside a string") }
            position += 1
        }
        var out = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<position]))
        while true {
            guard position < bytes.count else { throw fail("the answer ends inside a string") }
            let c = bytes[position]
            position += 1
            switch c {
            case 0x22:
                return String(decoding: out, as: UTF8.self)
            case 0x5C:
                guard position < bytes.count else { throw fail("the answer ends inside a string") }
                let e = bytes[position]
                position += 1
                switch e {
                case 0x22, 0x5C, 0x2F: out.append(e)
                case 0x62: out.append(0x08)
                case 0x66: out.append(0x0C)
                case 0x6E: out.append(0x0A)
                case 0x72: out.append(0x0D)
                case 0x74: out.append(0x09)
                case 0x75:
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar), position + 1 < bytes.count, bytes[position] == 0x5C, bytes[position + 1] == 0x75 {
                        position += 2
                        let low = try hex4()
                        if (0xDC00..<0xE000).contains(low) {
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else {
                            out.append(contentsOf: Array(String(Unicode.Scalar(0xFFFD)!).utf8))
                            scalar = low
                        }
                    }
                    let character = Unicode.Scalar(scalar) ?? Unicode.Scalar(0xFFFD)!
                    out.append(contentsOf: Array(String(character).utf8))
                default:
                    position -= 1
                    throw fail("an unknown escape in a string")
                }
            default:
                guard c >= 0x20 else { position -= 1; throw fail("a control character inside a string") }
                out.append(c)
            }
        }
    }

    private mutating func hex4() throws(ItemListDecoder.Failure) -> UInt32 {
        guard position + 4 <= bytes.count else { throw fail("the answer ends inside a \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[position]
            let digit: UInt8
            switch c {
            case 0x30...0x39: digit = c - 0x30
            case 0x41...0x46: digit = c - 0x41 + 10
            case 0x61...0x66: digit = c - 0x61 + 10
            default: throw fail("a bad \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    mutating func bool() throws(ItemListDecoder.Failure) -> Bool? {
        switch try peek() {
        case 0x74: try literal("true"); return true
        case 0x66: try literal("false"); return false
        case 0x6E: try literal("null"); return nil
        default: throw fail("expected true or false")
        }
    }

    /// The extent of a JSON number at the position (syntax checked), and whether it has a
    /// fraction or an exponent.
    private mutating func number() throws(ItemListDecoder.Failure) -> (range: Range<Int>, integral: Bool) {
        let start = position
        var i = position
        if i < bytes.count, bytes[i] == 0x2D { i += 1 }
        func digits() -> Int {
            let from = i
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { i += 1 }
            return i - from
        }
        let leading = i
        guard digits() > 0 else { throw fail("expected a number") }
        guard !(bytes[leading] == 0x30 && i - leading > 1) else { throw fail("a number with a leading zero") }
        var integral = true
        if i < bytes.count, bytes[i] == 0x2E {
            i += 1
            integral = false
            guard digits() > 0 else { position = i; throw fail("a number with nothing after its point") }
        }
        if i < bytes.count, bytes[i] == 0x65 || bytes[i] == 0x45 {
            i += 1
            integral = false
            if i < bytes.count, bytes[i] == 0x2B || bytes[i] == 0x2D { i += 1 }
            guard digits() > 0 else { position = i; throw fail("a number with an empty exponent") }
        }
        position = i
        return (start..<i, integral)
    }

    mutating func int64() throws(ItemListDecoder.Failure) -> Int64? {
        if try null() { return nil }
        let start = position
        let (range, integral) = try number()
        guard integral else { position = start; throw fail("expected a whole number") }
        var value: Int64 = 0
        let negative = bytes[range.lowerBound] == 0x2D
        for i in (negative ? range.lowerBound + 1 : range.lowerBound)..<range.upperBound {
            let digit = Int64(bytes[i] - 0x30)
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = negative ? m.subtractingReportingOverflow(digit) : m.addingReportingOverflow(digit)
            guard !o1, !o2 else { position = start; throw fail("a number too large for 64 bits") }
            value = s
        }
        return value
    }

    mutating func int32() throws(ItemListDecoder.Failure) -> Int32? {
        let start = position
        guard let value = try int64() else { return nil }
        guard let narrow = Int32(exactly: value) else { position = start; throw fail("a number too large for 32 bits") }
        return narrow
    }

    mutating func double() throws(ItemListDecoder.Failure) -> Double? {
        if try null() { return nil }
        let start = position
        let (range, _) = try number()
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { position = start; throw fail("a number out of range") }
        return value
    }

    mutating func date() throws(ItemListDecoder.Failure) -> Date? {
        let start = position
        guard var text = try string() else { return nil }
        guard let date = text.withUTF8({ JellyfinDateTranscoder.parse(utf8: $0) }) else {
            position = start
            throw fail("'\(text.prefix(40))' is not a date")
        }
        return date
    }

    /// An array of strings (`null`: empty).
    mutating func strings() throws(ItemListDecoder.Failure) -> [String] {
        guard try !null() else { return [] }
        var values: [String] = []
        try array { reader throws(ItemListDecoder.Failure) in
            guard let value = try reader.string() else { throw reader.fail("expected a string in the array") }
            values.append(value)
        }
        return values
    }

    /// An object of strings (`null`: nil).
    mutating func stringMap() throws(ItemListDecoder.Failure) -> [String: String]? {
        guard try !null() else { return nil }
        var values: [String: String] = [:]
        try map { reader, key throws(ItemListDecoder.Failure) in
            guard let value = try reader.string() else { throw reader.fail("expected a string in the object") }
            values[key] = value
        }
        return values
    }

    /// Any value, checked and passed over.
    mutating func skip() throws(ItemListDecoder.Failure) {
        switch try peek() {
        case 0x7B: try object { reader, _ throws(ItemListDecoder.Failure) in try reader.skip() }
        case 0x5B: try array { reader throws(ItemListDecoder.Failure) in try reader.skip() }
        case 0x22: _ = try skipString()
        case 0x74: try literal("true")
        case 0x66: try literal("false")
        case 0x6E: try literal("null")
        default: _ = try number()
        }
    }

    /// A string passed over (escapes checked) without decoding it.
    private mutating func skipString() throws(ItemListDecoder.Failure) {
        position += 1
        while position < bytes.count {
            let c = bytes[position]
            switch c {
            case 0x22: position += 1; return
            case 0x5C:
                guard position + 1 < bytes.count else { throw fail("the answer ends inside a string") }
                switch bytes[position + 1] {
                case 0x22, 0x5C, 0x2F, 0x62, 0x66, 0x6E, 0x72, 0x74: position += 2
                case 0x75: position += 2; _ = try hex4()
                default: position += 1; throw fail("an unknown escape in a string")
                }
            default:
                guard c >= 0x20 else { throw fail("a control character inside a string") }
                position += 1
            }
        }
        throw fail("the answer ends inside a string")
    }
}
