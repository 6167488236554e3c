import Foundation
import Synchronization

/// The stand-in's media: real files made with Debian's ffmpeg at first run (movies, a series
/// with two seasons, an album, a poster for each), probed with ffprobe, and remembered in
/// `DIR/media/catalog.json` so later runs start at once.
struct MediaCatalog: Codable {
    struct Stream: Codable {
        var type: String          // Video, Audio, Subtitle
        var codec: String
        var width: Int?
        var height: Int?
        var channels: Int?
        var sampleRate: Int?
        var bitRate: Int?
        var index: Int
        var language: String?
        var title: String?
        var isDefault: Bool?
        /// A subtitle file beside the media (its name in the media folder): an external stream.
        var externalFile: String?
    }

    struct Entry: Codable {
        var key: String           // stable identity, hashed into the item id
        var kind: String          // Movie, Series, Season, Episode, MusicAlbum, Audio
        var name: String
        var year: Int?
        var parentKey: String?    // season → series, episode → season, audio → album
        var indexNumber: Int?
        var parentIndexNumber: Int?
        var overview: String?
        var genres: [String]
        var path: String?
        var container: String?
        var size: Int?
        var runTimeTicks: Int64?
        var bitrate: Int?
        var streams: [Stream]
        var poster: String?
        var posterBlurHash: String?
        var posterWidth: Int?
        var posterHeight: Int?
        var artist: String?
    }

    /// 2: Mandelbrot Zoom has two audio languages and subtitles inside and beside the file.
    var version = 2
    var entries: [Entry]

    static func loadOrMake(dataDirectory: String, log: (String) -> Void) throws -> MediaCatalog {
        let mediaDir = dataDirectory + "/media"
        let catalogPath = mediaDir + "/catalog.json"
        if let data = FileManager.default.contents(atPath: catalogPath),
           let catalog = try? JSONDecoder().decode(MediaCatalog.self, from: data), catalog.version == 2,
           catalog.entries.allSatisfy({ $0.path.map { FileManager.default.fileExists(atPath: mediaDir + "/" + $0) } ?? true }) {
            return catalog
        }
        try FileManager.default.createDirectory(atPath: mediaDir, withIntermediateDirectories: true)
        let ffmpeg = try Tool.find("ffmpeg"), ffprobe = try Tool.find("ffprobe")
        log("making the stand-in's media with \(ffmpeg) in \(mediaDir) (first run)…")
        var entries: [Entry] = []

        func poster(_ name: String, source: String) throws -> (String, String, Int, Int) {
            let file = name + ".jpg"
            try Tool.run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "\(source)=size=200x300", "-frames:v", "1", "-q:v", "5", mediaDir + "/" + file])
            let raw = try Tool.run(ffmpeg, ["-v", "error", "-i", mediaDir + "/" + file, "-vf", "scale=20:30", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
            return (file, BlurHash.encode(rgb: Array(raw), width: 20, height: 30), 200, 300)
        }
        func video(_ file: String, source: String, tone: Int, seconds: Int) throws {
            try Tool.run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "\(source)=size=320x240:rate=25",
                                  "-f", "lavfi", "-i", "sine=frequency=\(tone):sample_rate=48000:duration=\(seconds)",
                                  "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "96k",
                                  "-t", "\(seconds)", mediaDir + "/" + file])
        }
        func multiTrackVideo(_ file: String, source: String, tones: (Int, Int), seconds: Int) throws {
            let english = mediaDir + "/movie3.en.srt", french = mediaDir + "/movie3.fr.srt"
            try "1\n00:00:00,000 --> 00:00:02,000\nAn endless coastline.\n".write(toFile: english, atomically: true, encoding: .utf8)
            try "1\n00:00:00,000 --> 00:00:02,000\nUne côte sans fin.\n".write(toFile: french, atomically: true, encoding: .utf8)
            try Tool.run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "\(source)=size=320x240:rate=25",
                                  "-f", "lavfi", "-i", "sine=frequency=\(tones.0):sample_rate=48000:duration=\(seconds)",
                                  "-f", "lavfi", "-i", "sine=frequency=\(tones.1):sample_rate=48000:duration=\(seconds)",
                                  "-i", english, "-map", "0:v", "-map", "1:a", "-map", "2:a", "-map", "3:s",
                                  "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "96k", "-c:s", "srt",
                                  "-metadata:s:a:0", "language=eng", "-metadata:s:a:0", "title=English",
                                  "-metadata:s:a:1", "language=ger", "-metadata:s:a:1", "title=Deutsch",
                                  "-metadata:s:s:0", "language=eng", "-disposition:a:1", "0", "-disposition:s:0", "0",
                                  "-t", "\(seconds)", mediaDir + "/" + file])
            try? FileManager.default.removeItem(atPath: english)
        }
        func audio(_ file: String, tone: Int, seconds: Int) throws {
            try Tool.run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=\(tone):sample_rate=44100:duration=\(seconds)",
                                  "-c:a", "flac", mediaDir + "/" + file])
        }
        func probed(_ entry: Entry) throws -> Entry { try probe(entry, ffprobe: ffprobe, mediaDirectory: mediaDir) }

        let movies: [(String, Int, String, Int, String)] = [
            ("Test Pattern", 2021, "testsrc", 440, "A calm study of a test card, with a steady tone."),
            ("Colour Bars", 2019, "smptebars", 1000, "Seven bars and a reference tone: the broadcast classic."),
            ("Mandelbrot Zoom", 2024, "mandelbrot", 330, "An endless coastline, rendered frame by frame."),
        ]
        for (n, movie) in movies.enumerated() {
            // The third film carries tracks to choose from: audio in English and German, English
            // subtitles inside the file and French ones beside it (movie3.fr.srt).
            let file = n == 2 ? "movie3.mkv" : "movie\(n + 1).mp4"
            if n == 2 { try multiTrackVideo(file, source: movie.2, tones: (movie.3, 550), seconds: 2) } else {
                try video(file, source: movie.2, tone: movie.3, seconds: 2)
            }
            let art = try poster("movie\(n + 1)-poster", source: movie.2)
            entries.append(try probed(Entry(key: "movie/\(movie.0)", kind: "Movie", name: movie.0, year: movie.1, overview: movie.4,
                                            genres: n == 1 ? ["Documentary", "History"] : ["Documentary"], path: file, streams: [],
                                            poster: art.0, posterBlurHash: art.1, posterWidth: art.2, posterHeight: art.3)))
        }
        let seriesArt = try poster("series-poster", source: "rgbtestsrc")
        entries.append(Entry(key: "series/Signal Tests", kind: "Series", name: "Signal Tests", year: 2020,
                             overview: "Each week a new signal is put through its paces.", genres: ["Science"], streams: [],
                             poster: seriesArt.0, posterBlurHash: seriesArt.1, posterWidth: seriesArt.2, posterHeight: seriesArt.3))
        let seasons: [[String]] = [["Pilot Tone", "Carrier Wave", "Phase Shift"], ["Return Path", "Dead Air"]]
        for (s, episodes) in seasons.enumerated() {
            let seasonKey = "season/Signal Tests/\(s + 1)"
            entries.append(Entry(key: seasonKey, kind: "Season", name: "Season \(s + 1)", year: 2020 + s, parentKey: "series/Signal Tests",
                                 indexNumber: s + 1, genres: [], streams: []))
            for (e, title) in episodes.enumerated() {
                let file = "s\(s + 1)e\(e + 1).mkv"
                try video(file, source: "testsrc2", tone: 200 + 100 * e, seconds: 1)
                entries.append(try probed(Entry(key: "episode/Signal Tests/\(s + 1)/\(e + 1)", kind: "Episode", name: title, year: 2020 + s,
                                                parentKey: seasonKey, indexNumber: e + 1, parentIndexNumber: s + 1,
                                                overview: "Episode \(e + 1) of season \(s + 1).", genres: ["Science"], path: file, streams: [])))
            }
        }
        let albumArt = try poster("album-cover", source: "cellauto")
        entries.append(Entry(key: "album/Test Tones", kind: "MusicAlbum", name: "Test Tones", year: 2023, genres: ["Ambient"], streams: [],
                             poster: albumArt.0, posterBlurHash: albumArt.1, posterWidth: albumArt.2, posterHeight: albumArt.3,
                             artist: "Farcast Test Orchestra"))
        for (t, track) in [("A 220", 220), ("E 330", 330), ("A 440", 440)].enumerated() {
            let file = "track\(t + 1).flac"
            try audio(file, tone: track.1, seconds: 2)
            entries.append(try probed(Entry(key: "audio/Test Tones/\(t + 1)", kind: "Audio", name: track.0, year: 2023, parentKey: "album/Test Tones",
                                            indexNumber: t + 1, parentIndexNumber: 1, genres: ["Ambient"], path: file, streams: [],
                                            artist: "Farcast Test Orchestra")))
        }
        let catalog = MediaCatalog(entries: entries)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(catalog).write(to: URL(fileURLWithPath: catalogPath), options: .atomic)
        return catalog
    }

    /// The entry with its file's container, size, bitrate, runtime and streams, as ffprobe reads them.
    static func probe(_ entry: Entry, ffprobe: String, mediaDirectory mediaDir: String) throws -> Entry {
        var entry = entry
        guard let path = entry.path else { return entry }
        let json = try Tool.run(ffprobe, ["-v", "error", "-of", "json", "-show_format", "-show_streams", mediaDir + "/" + path])
        let probe = try JSONDecoder().decode(Probe.self, from: json)
        entry.container = probe.format.format_name.split(separator: ",").first.map(String.init)
        if entry.container == "mov" { entry.container = "mp4" }
        if entry.container == "matroska" { entry.container = "mkv" }
        entry.size = Int(probe.format.size ?? "")
        entry.bitrate = Int(probe.format.bit_rate ?? "")
        if let seconds = Double(probe.format.duration ?? "") { entry.runTimeTicks = Int64(seconds * 10_000_000) }
        entry.streams = probe.streams.map { s in
            let type = ["video": "Video", "audio": "Audio", "subtitle": "Subtitle"][s.codec_type ?? ""] ?? "Data"
            return Stream(type: type, codec: s.codec_name ?? "", width: s.width, height: s.height, channels: s.channels,
                          sampleRate: Int(s.sample_rate ?? ""), bitRate: Int(s.bit_rate ?? ""), index: s.index,
                          language: s.tags?["language"], title: s.tags?["title"], isDefault: s.disposition?["default"].map { $0 == 1 })
        }
        // Subtitle files beside the media (NAME.LANG.srt) follow the file's own streams, as a
        // real server lists them.
        let stem = (path as NSString).deletingPathExtension
        let sidecars = ((try? FileManager.default.contentsOfDirectory(atPath: mediaDir)) ?? [])
            .filter { $0.hasPrefix(stem + ".") && $0.hasSuffix(".srt") }.sorted()
        for sidecar in sidecars {
            let language = sidecar.dropFirst(stem.count + 1).dropLast(4)
            entry.streams.append(Stream(type: "Subtitle", codec: "subrip", index: entry.streams.count,
                                        language: language == "fr" ? "fre" : String(language), isDefault: false, externalFile: sidecar))
        }
        return entry
    }

    /// A film of at least `megabytes` MB for the download benchmark ("Large File", 2026): ten
    /// seconds of noisy 720p H.264 at a high bitrate, repeated without re-encoding until it is
    /// that large. Made once per size in the data folder; listed only when asked for.
    static func large(megabytes: Int, dataDirectory: String, log: (String) -> Void) throws -> Entry {
        let mediaDir = dataDirectory + "/media"
        let file = "large-\(megabytes)mb.mkv"
        let ffmpeg = try Tool.find("ffmpeg"), ffprobe = try Tool.find("ffprobe")
        if !FileManager.default.fileExists(atPath: mediaDir + "/" + file) {
            log("making a \(megabytes) MB film with \(ffmpeg) (once)…")
            try FileManager.default.createDirectory(atPath: mediaDir, withIntermediateDirectories: true)
            let clip = mediaDir + "/large-clip.mkv"
            try Tool.run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25,noise=alls=30:allf=t",
                                  "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                                  "-t", "10", "-c:v", "libx264", "-preset", "ultrafast", "-crf", "16", "-g", "25", "-c:a", "aac", clip])
            let clipBytes = max(1, (try FileManager.default.attributesOfItem(atPath: clip)[.size] as? NSNumber)?.intValue ?? 1)
            let loops = max(0, (megabytes * 1_000_000 + clipBytes - 1) / clipBytes - 1)
            try Tool.run(ffmpeg, ["-v", "error", "-y", "-stream_loop", "\(loops)", "-i", clip, "-c", "copy", mediaDir + "/" + file + ".tmp.mkv"])
            try FileManager.default.moveItem(atPath: mediaDir + "/" + file + ".tmp.mkv", toPath: mediaDir + "/" + file)
            try? FileManager.default.removeItem(atPath: clip)
        }
        return try probe(Entry(key: "movie/Large File", kind: "Movie", name: "Large File", year: 2026, overview: "A long noisy test card, for timing downloads.",
                               genres: ["Documentary"], path: file, streams: []), ffprobe: ffprobe, mediaDirectory: mediaDir)
    }

    private struct Probe: Decodable {
        struct Format: Decodable { var format_name: String; var duration: String?; var size: String?; var bit_rate: String? }
        struct S: Decodable {
            var index: Int; var codec_type: String?; var codec_name: String?; var width: Int?; var height: Int?
            var channels: Int?; var sample_rate: String?; var bit_rate: String?
            var tags: [String: String]?; var disposition: [String: Int]?
        }
        var format: Format
        var streams: [S]
    }
}

/// Runs the external tools the stand-in needs.
enum Tool {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func find(_ name: String) throws -> String {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") + ["/usr/bin", "/usr/local/bin"] {
            let path = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw Failure(description: "\(name) not found: install Debian's ffmpeg (scripts/setup does)")
    }

    @discardableResult
    static func run(_ tool: String, _ arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Drain stderr on another thread so a chatty tool never blocks on a full pipe.
        let errData = Mutex(Data())
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            let bytes = err.fileHandleForReading.readDataToEndOfFile()
            errData.withLock { $0 = bytes }
            group.leave()
        }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        group.wait()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "\(tool) \(arguments.joined(separator: " ")) failed: \(String(decoding: errData.withLock { $0 }, as: UTF8.self))")
        }
        return data
    }
}
