import Foundation
import Testing

/// CONTRIBUTING.md's map of the sources is checked against the tree, so it cannot drift from it
/// (issue 49: it had put the library's ActivityStateMachine in the daemon): every folder of the
/// two Swift libraries is on the map and every folder and file on the map exists, every type it
/// names is declared in Sources, and the unit tests' folders mirror the folders they test.
@Suite("CONTRIBUTING's map of the sources and the test folders match the tree")
struct RepositoryMapTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let libraries = ["Sources/KeepAlive", "Sources/KeepAliveDaemon"]

    /// The map's entries: the folders and files it lists (relative to the root), and the words
    /// of its descriptions.
    struct Map {
        var folders: Set<String> = []
        var files: [String] = []
        var descriptions: [String] = []
    }

    static func map() throws -> Map {
        let text = try String(contentsOf: root.appendingPathComponent("CONTRIBUTING.md"), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try #require(lines.firstIndex { $0.hasPrefix("Sources/KeepAlive/ ") }, "no map of Sources/KeepAlive/ in CONTRIBUTING.md")
        let end = try #require(lines[start...].firstIndex { $0.hasPrefix("Sources/keepalived/") }, "the map ends at Sources/keepalived/")
        var map = Map()
        var library = ""
        var folder = ""
        for line in lines[start..<end] {
            let indent = line.prefix { $0 == " " }.count
            let entry = line.dropFirst(indent).prefix { $0 != " " }
            // Entries sit at 0, 2 and 4 spaces; a description's continuation far to the right.
            guard indent <= 4, !entry.isEmpty else {
                map.descriptions.append(line)
                continue
            }
            map.descriptions.append(String(line.dropFirst(indent + entry.count)))
            let name = entry.hasSuffix("/") ? String(entry.dropLast()) : String(entry)
            switch (indent, entry.hasSuffix("/")) {
            case (0, true): library = name
            case (2, true): folder = "\(library)/\(name)"; map.folders.insert(folder)
            case (4, true): map.folders.insert("\(folder)/\(name)")
            case (4, false) where name.hasSuffix(".swift"): map.files.append("\(folder)/\(name)")
            default: Issue.record("an entry the map's check cannot place: \(line)")
            }
        }
        return map
    }

    /// Every folder below `directory` (relative to the root), a DocC catalog's insides left out.
    static func folders(below directory: String) throws -> Set<String> {
        let base = root.appendingPathComponent(directory)
        var found: Set<String> = []
        let enumerator = try #require(FileManager.default.enumerator(at: base, includingPropertiesForKeys: [.isDirectoryKey]))
        for case let url as URL in enumerator {
            guard (try? url.resourceValues(forKeys: [.isDirectoryKey]))?.isDirectory == true else { continue }
            if url.pathExtension == "docc" { enumerator.skipDescendants() }
            found.insert(directory + url.path.dropFirst(base.path.count))
        }
        return found
    }

    @Test("every folder of KeepAlive and KeepAliveDaemon is on the map, and every folder and file on it exists")
    func foldersAndFiles() throws {
        let map = try Self.map()
        var tree: Set<String> = []
        for library in Self.libraries { tree.formUnion(try Self.folders(below: library)) }
        #expect(tree.subtracting(map.folders).sorted() == [], "folders missing from CONTRIBUTING's map")
        #expect(map.folders.subtracting(tree).sorted() == [], "folders on CONTRIBUTING's map that are not in Sources")
        let missing = map.files.filter { !FileManager.default.fileExists(atPath: Self.root.appendingPathComponent($0).path) }
        #expect(missing == [], "files on CONTRIBUTING's map that are not in Sources")
    }

    @Test("every type the map names is declared in Sources")
    func namedTypesExist() throws {
        let map = try Self.map()
        // Two-humped words (ActivityStateMachine, PlayerLoans): the map's names of types.
        let camelCase = /\b[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+\b/
        let named = Set(map.descriptions.flatMap { $0.matches(of: camelCase).map { String($0.output) } })
        var declared: Set<String> = ["DocC", "PipeWire"]  // a catalog's kind and a project, not code
        let declaration = /\b(?:struct|class|enum|protocol|actor|typealias|case|func|var|let)\s+([A-Za-z_][A-Za-z0-9_]*)/
        let sources = Self.root.appendingPathComponent("Sources")
        let enumerator = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        for case let url as URL in enumerator {
            declared.insert(url.deletingPathExtension().lastPathComponent)
            guard url.pathExtension == "swift" else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            for match in text.matches(of: declaration) { declared.insert(String(match.output.1)) }
        }
        #expect(named.subtracting(declared).sorted() == [], "names on CONTRIBUTING's map that Sources does not declare")
    }

    @Test("the unit tests' folders mirror the folders of the library they test")
    func testFoldersMirrorSources() throws {
        for (tests, library) in [("Tests/KeepAliveTests", "Sources/KeepAlive"), ("Tests/KeepAliveDaemonTests", "Sources/KeepAliveDaemon")] {
            let testFolders = try Self.folders(below: tests).map { library + $0.dropFirst(tests.count) }
            let sourceFolders = try Self.folders(below: library)
            #expect(Set(testFolders).subtracting(sourceFolders).sorted() == [], "\(tests): folders with no counterpart in \(library)")
        }
    }
}
