import Testing
@testable import Jellyfin

/// The Range answers a download resumes by: read strictly, since a wrong range would splice the
/// wrong bytes into a file (the live paths are IntegrationTests' JellyfinDownloadTests).
struct DownloadHeaderTests {
    @Test func contentRangesAreReadStrictly() {
        #expect(JellyfinSession.contentRange("bytes 100-199/1000")! == (100, 199, 1000))
        #expect(JellyfinSession.contentRange(" bytes 0-0/1 ")! == (0, 0, 1))
        for broken in ["bytes 200-100/1000", "bytes 0-1000/1000", "bytes */1000", "bytes 1-2", "items 1-2/3", "bytes -1-2/3", "bytes a-b/c", ""] {
            #expect(JellyfinSession.contentRange(broken) == nil, "\(broken)")
        }
        #expect(JellyfinSession.unsatisfiedTotal("bytes */31821") == 31821)
        #expect(JellyfinSession.unsatisfiedTotal("bytes 0-1/2") == nil)
    }

    @Test func sizesReadAsAPersonReadsThem() {
        #expect(DownloadError.size(10485) == "10.2 KiB")
        #expect(DownloadError.size(5 << 20) == "5.0 MiB")
        #expect(DownloadError.size(3 << 30) == "3.00 GiB")
    }
}
