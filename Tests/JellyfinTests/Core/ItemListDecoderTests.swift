import Foundation
import Testing
@testable import Jellyfin

/// The listing's own page reader (`ItemListDecoder`) against the generated decoder it replaces on
/// the hot path: on the same pages both must give the same `JellyfinItem`s, and what is broken
/// must be a typed error naming where, never a crash or a hang.
struct ItemListDecoderTests {
    /// The generated layer's reading of a page, as the generated client does it.
    static func generated(_ json: [UInt8]) throws -> [JellyfinItem] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            try JellyfinDateTranscoder().decode(decoder.singleValueContainer().decode(String.self))
        }
        let page = try decoder.decode(Components.Schemas.BaseItemDtoQueryResult.self, from: Data(json))
        return (page.items ?? []).map(JellyfinItem.init)
    }

    /// A random item with the fields a listing reads, in the forms servers write them.
    static func randomItem(_ g: inout some RandomNumberGenerator, index: Int) -> String {
        func pick<T>(_ values: [T]) -> T { values[Int.random(in: 0..<values.count, using: &g)] }
        func maybe(_ text: @autoclosure () -> String) -> String? { Bool.random(using: &g) ? text() : nil }
        let names = ["Colour Bars", "Tön \\\"Test\\\"", "日本語のタイトル", "Line\\nBreak", "Emoji \\ud83c\\udfac", "Slash \\/ ok", "Tab\\there", "\\u00e9t\\u00e9"]
        let id = String(format: "%032x", index * 7919 + 1)
        var fields: [String] = [
            #""Id":"\#(id)""#,
            #""Name":"\#(pick(names))""#,
            #""Type":"\#(pick(["Movie", "Series", "Episode", "Audio", "MusicAlbum", "Folder"]))""#,
            #""ServerId":"2699a669dd66fe9bc05cf70c7e23d83e""#,
        ]
        if let v = maybe(pick(["true", "false"])) { fields.append(#""IsFolder":\#(v)"#) }
        if let v = maybe(String(Int.random(in: 1900...2030, using: &g))) { fields.append(#""ProductionYear":\#(v)"#) }
        if let v = maybe(String(Int64.random(in: 0...100_000_000_000, using: &g))) { fields.append(#""RunTimeTicks":\#(v)"#) }
        if let v = maybe(pick(["7.5", "8.1", "6", "9.25", "1e1", "null"])) { fields.append(#""CommunityRating":\#(v)"#) }
        if let v = maybe(pick(["2019-06-15T00:00:00.0000000Z", "2024-11-21T21:04:49.123Z", "2020-01-01T10:00:00", "2021-03-04T05:06:07+02:00"])) {
            fields.append(#""PremiereDate":"\#(v)""#)
            fields.append(#""DateCreated":"\#(v)""#)
        }
        if let v = maybe(String(Int.random(in: 0...40, using: &g))) { fields.append(#""IndexNumber":\#(v)"#) }
        if let v = maybe(String(Int.random(in: 0...9, using: &g))) { fields.append(#""ParentIndexNumber":\#(v)"#) }
        if let v = maybe(String(Int.random(in: 0...300, using: &g))) { fields.append(#""ChildCount":\#(v)"#) }
        if maybe("") != nil { fields.append(#""Genres":["Drama","Sci-Fi"],"Artists":["A \u00c4"]"#) }
        if maybe("") != nil { fields.append(#""SeriesName":"Signal Tests","SeriesId":"\#(id)","SeasonId":"\#(id)","SeasonName":"Season 1""#) }
        if maybe("") != nil { fields.append(#""Album":"Tones","AlbumId":"\#(id)","AlbumArtist":"Farcast""#) }
        if let v = maybe(pick(["PG", "R", "null"])) { fields.append(#""OfficialRating":\#(v == "null" ? v : "\"\(v)\"")"#) }
        if maybe("") != nil { fields.append(#""Overview":"A long text with \\\\ backslashes and \\u2028 separators.""#) }
        if maybe("") != nil { fields.append(#""Container":"mp4","MediaType":"Video","Path":"/media/movies/a.mp4","ParentId":"\#(id)""#) }
        if maybe("") != nil { fields.append(#""CollectionType":"movies""#) }
        if maybe("") != nil {
            fields.append(#""UserData":{"Key":"\#(id)","PlaybackPositionTicks":\#(Int.random(in: 0...1_000_000_000, using: &g)),"IsFavorite":\#(Bool.random(using: &g)),"PlayCount":\#(Int.random(in: 0...5, using: &g)),"ItemId":"\#(id)","Played":\#(Bool.random(using: &g))\#(Bool.random(using: &g) ? #","LastPlayedDate":"2024-11-22T10:00:00.123Z","UnplayedItemCount":3"# : "")}"#)
        } else if maybe("") != nil {
            fields.append(#""UserData":null"#)
        }
        if maybe("") != nil {
            fields.append(#""ImageTags":{"Primary":"f889c9431046a1e877ed2576c966fdfd"},"BackdropImageTags":\#(pick(["[]", #"["b1","b2"]"#])),"ImageBlurHashes":{"Primary":{"f889c9431046a1e877ed2576c966fdfd":"LkF$eH.j#Z+K%JXewO-CV^sXSdNG"},"Backdrop":{}}"#)
        }
        if maybe("") != nil {
            fields.append(#""MediaStreams":[{"Index":0,"Type":"Video","Codec":"hevc","Width":3840,"Height":2160,"BitRate":20000000,"VideoRangeType":"DOVIWithSomethingNew","IsDefault":true},{"Index":1,"Type":"Audio","Codec":"eac3","Channels":6,"SampleRate":48000,"Language":"eng","Title":"Main"},{"Index":2,"Type":"Subtitle","Codec":"subrip","Language":"fre","IsExternal":true,"DeliveryMethod":"External","DeliveryUrl":"/Videos/a/a/Subtitles/2/0/Stream.srt"}]"#)
        }
        // Fields a listing does not keep, which must be passed over.
        if maybe("") != nil { fields.append(#""LocationType":"FileSystem","VideoType":"VideoFile","PrimaryImageAspectRatio":0.6666666666666666,"Taglines":[],"ProviderIds":{"Tmdb":"1"},"RemoteTrailers":[{"Url":"http://x/y","Name":null}]"#) }
        fields.shuffle(using: &g)
        return "{" + fields.joined(separator: Bool.random(using: &g) ? "," : " ,\n ") + "}"
    }

    static func randomPage(_ g: inout some RandomNumberGenerator, count: Int) -> [UInt8] {
        let items = (0..<count).map { randomItem(&g, index: $0) }.joined(separator: ",")
        return Array(#"{"Items":[\#(items)],"TotalRecordCount":\#(count + 17),"StartIndex":40}"#.utf8)
    }

    @Test func givesTheSameItemsAsTheGeneratedDecoder() throws {
        var g = SystemRandomNumberGenerator()
        for round in 0..<40 {
            let page = Self.randomPage(&g, count: 25)
            let ours = try ItemListDecoder.decodePage(page)
            let theirs = try Self.generated(page)
            #expect(ours.items.count == 25 && ours.total == 42 && ours.startIndex == 40)
            for (a, b) in zip(ours.items, theirs) where a != b {
                Issue.record("round \(round): item \(a.id) differs:\n ours   \(a)\n theirs \(b)\npage: \(String(decoding: page, as: UTF8.self))")
                return
            }
        }
    }

    @Test func readsTheNewerServerPageAsTheGeneratedDecoderDoes() throws {
        let page = Array(GeneratedLayerTests.newerServerPage.utf8)
        #expect(try ItemListDecoder.decodePage(page).items == Self.generated(page))
    }

    @Test func stringEscapesAndUnicode() throws {
        let page = Array(#"{"Items":[{"Id":"a","Name":"\u00e9\ud83c\udfac\"\\\/\b\f\n\r\t x","Genres":["\u65e5"]},{"Id":"b","Name":"\ud800 lone"}]}"#.utf8)
        let items = try ItemListDecoder.decodePage(page).items
        #expect(items[0].name == "é🎬\"\\/\u{8}\u{c}\n\r\t x")
        #expect(items[0].genres == ["日"])
        #expect(items[1].name == "\u{FFFD} lone")
    }

    @Test func nullsAreAbsent() throws {
        let page = Array(#"{"Items":[{"Id":null,"Name":null,"UserData":null,"Genres":null,"ImageTags":null,"MediaStreams":null,"ProductionYear":null}],"TotalRecordCount":null,"StartIndex":null}"#.utf8)
        let decoded = try ItemListDecoder.decodePage(page)
        #expect(decoded.items.count == 1 && decoded.total == nil && decoded.startIndex == nil)
        #expect(decoded.items[0].name == "" && decoded.items[0].userData == nil && decoded.items[0].productionYear == nil)
        #expect(try ItemListDecoder.decodePage(Array(#"{"Items":null}"#.utf8)).items.isEmpty)
    }

    /// Each broken page is refused with a reason and the byte where it went wrong.
    @Test func brokenPagesAreTypedFailures() {
        let cases: [(String, String, String)] = [
            ("truncated", #"{"Items":[{"Name":"A","Id":"x"#, "ends"),
            ("truncated in a skipped value", #"{"Items":[{"Name":"A","Other":[1,2"#, "ends"),
            ("items not an array", #"{"Items":"none","TotalRecordCount":1}"#, "expected an array"),
            ("a count not a number", #"{"Items":[],"TotalRecordCount":"many"}"#, "expected a number"),
            ("a name not a string", #"{"Items":[{"Name":5}]}"#, "expected a string"),
            ("a year with a fraction", #"{"Items":[{"ProductionYear":2019.5}]}"#, "whole number"),
            ("a year beyond 32 bits", #"{"Items":[{"ProductionYear":99999999999}]}"#, "32 bits"),
            ("ticks beyond 64 bits", #"{"Items":[{"RunTimeTicks":99999999999999999999}]}"#, "64 bits"),
            ("a bad date", #"{"Items":[{"DateCreated":"last tuesday"}]}"#, "is not a date"),
            ("not JSON", "<html>gateway timeout</html>", "expected an object"),
            ("text after the value", #"{"Items":[]} trailing"#, "after the JSON value"),
            ("a leading zero", #"{"Items":[],"TotalRecordCount":012}"#, "leading zero"),
            ("a control character", "{\"Items\":[{\"Name\":\"a\u{1}b\"}]}", "control character"),
            ("a bad escape", #"{"Items":[{"Name":"a\qb"}]}"#, "unknown escape"),
            ("a bad escape in a skipped value", #"{"Items":[{"Other":"a\qb"}]}"#, "unknown escape"),
            ("a missing colon", #"{"Items" []}"#, "':'"),
            ("a missing comma", #"{"Items":[{"Id":"a" "Name":"b"}]}"#, "',' or '}'"),
            ("a bare word", #"{"Items":[{"IsFolder":yes}]}"#, "true or false"),
            ("an unquoted key", #"{Items:[]}"#, "key in quotes"),
            ("empty", "", "ends"),
            ("a null item", #"{"Items":[{"Id":"a"},null]}"#, "expected an object"),
        ]
        for (what, json, expected) in cases {
            do {
                let page = try ItemListDecoder.decodePage(Array(json.utf8))
                Issue.record("\(what): decoded \(page.items.count) items")
            } catch {
                #expect(error.reason.contains(expected), "\(what): \(error)")
                #expect(error.offset >= 0 && error.offset <= json.utf8.count, "\(what): \(error)")
            }
        }
    }

    /// Nesting a hostile server sends in a field nobody reads stops at the bound, not the stack.
    @Test func deepNestingIsRefused() {
        let deep = #"{"Items":[{"Other":"# + String(repeating: "[", count: 200_000) + String(repeating: "]", count: 200_000) + "}]}"
        #expect(throws: ItemListDecoder.Failure.self) { try ItemListDecoder.decodePage(Array(deep.utf8)) }
        let fine = #"{"Items":[{"Other":"# + String(repeating: "[", count: 50) + String(repeating: "]", count: 50) + "}]}"
        #expect(throws: Never.self) { try ItemListDecoder.decodePage(Array(fine.utf8)) }
    }

    /// Random cuts, byte flips and insertions of random pages: each decodes or is a typed failure.
    @Test func fuzzedPagesNeverCrash() {
        var g = SystemRandomNumberGenerator()
        let specials: [UInt8] = Array(#"{}[]":,\0123456789-+.eEtrufalsn "#.utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xFF]
        var decoded = 0, refused = 0
        for _ in 0..<3_000 {
            var bytes = Self.randomPage(&g, count: 3)
            for _ in 0..<Int.random(in: 1...4, using: &g) {
                guard !bytes.isEmpty else { break }
                let index = Int.random(in: 0..<bytes.count, using: &g)
                switch Int.random(in: 0..<4, using: &g) {
                case 0: bytes[index] = specials.randomElement(using: &g)!
                case 1: bytes.removeSubrange(index...)
                case 2: bytes.insert(specials.randomElement(using: &g)!, at: index)
                default: bytes.remove(at: index)
                }
            }
            do {
                _ = try ItemListDecoder.decodePage(bytes)
                decoded += 1
            } catch {
                #expect(!error.reason.isEmpty && error.offset <= bytes.count)
                refused += 1
            }
        }
        #expect(decoded + refused == 3_000)
        #expect(refused > 1_000, "most damaged pages must be refused (\(refused))")
    }
}
