import EventLog
import Foundation
import Testing
import TestSupport

/// The request-body parser against `JSONDecoder`, the reference it replaced:
/// the same documents accepted and refused, the same values out.
@Suite struct JSONParserTests {
    private func reference(_ bytes: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    @Test(arguments: [
        #"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#, #"  [ 1 , -0 , 0.5 , -1.25e-3 , 1E+2 , 9223372036854775807 ] "#,
        #""caf\u00e9 \ud83d\ude80 \"q\" \\ \/ \b\f\n\r\t""#, #"{"emoji":"🚀","cjk":"日本語","mixed":"a\u0001b"}"#,
        #"{"big":92233720368547758070,"tiny":1e-320,"neg":-9223372036854775808}"#, "{}", "[]", "null", "0", #""""#,
        #"{"k":1,"k":2}"#, #"{"k":{"a":1},"j":0,"k":"second"}"#,
    ])
    func acceptsWhatJSONDecoderAccepts(text: String) throws {
        let parsed = try JSONParser.parse(Array(text.utf8))
        let expected = try #require(reference(Array(text.utf8)))
        #expect(parsed.canonicalText == expected.canonicalText)
    }

    @Test(arguments: [
        "", " ", "{", "[01]", "[1.]", "[.5]", "[1e]", "[-]", "[+1]", "tru", "nulll", "[1 2]",
        #"{"a" 1}"#, #"{1:2}"#, "\"unterminated", "\"tab\there\"", #""\x""#, #""\u12""#, #""\ud800""#, #""\udc00x""#,
        #""\ud800\u0041""#, "[1e400]", "[NaN]", "{} {}", "'single'",
    ])
    func refusesWhatJSONDecoderRefuses(text: String) {
        #expect(throws: JSONParser.Failure.self) { try JSONParser.parse(Array(text.utf8)) }
        #expect(reference(Array(text.utf8)) == nil, "JSONDecoder accepts \(text)")
    }

    /// JSONDecoder accepts these; RFC 8259 does not, and neither do we.
    @Test(arguments: ["[1,]", #"{"a":1,}"#, #"{"batch":[{"type":"track"},]}"#])
    func refusesTrailingCommas(text: String) throws {
        let failure = try #require(throws: JSONParser.Failure.self) { try JSONParser.parse(Array(text.utf8)) }
        #expect(failure.reason.contains("trailing comma"))
    }

    @Test func refusesInvalidUTF8AndSaysWhere() throws {
        let bytes: [UInt8] = Array(#"{"name":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8)
        let failure = try #require(throws: JSONParser.Failure.self) { try JSONParser.parse(bytes) }
        #expect(failure.offset == 9)
        #expect(failure.reason.contains("UTF-8"))
        #expect(reference(bytes) == nil)
    }

    @Test func boundsNesting() throws {
        let ok = String(repeating: "[", count: JSONParser.maxDepth) + String(repeating: "]", count: JSONParser.maxDepth)
        #expect(throws: Never.self) { try JSONParser.parse(Array(ok.utf8)) }
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        let failure = try #require(throws: JSONParser.Failure.self) { try JSONParser.parse(Array(deep.utf8)) }
        #expect(failure.reason.contains("nested"))
    }

    /// Every input in the fuzzer's corpus, and mutations of the valid ones: the
    /// two parsers agree on acceptance and on the value (trailing commas, and
    /// nesting beyond our bound, which JSONDecoder allows to 512, aside).
    @Test func agreesWithJSONDecoderOnTheFuzzCorpusAndMutations() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../fuzz/corpus").standardizedFileURL
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus.path).sorted()
        #expect(files.count > 100)
        var inputs = try files.map { Array(try Data(contentsOf: corpus.appendingPathComponent($0))) }
        var rng = SplitMix(seed: 7)
        for seed in inputs where reference(seed) != nil && !seed.isEmpty {
            for _ in 0..<20 {
                var mutated = seed
                let at = Int.random(in: 0..<mutated.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: mutated.remove(at: at)
                case 1: mutated.insert(Array(#"{}[]",:\0e.-9u"#.utf8).randomElement(using: &rng) ?? 0, at: at)
                default: mutated[at] = UInt8.random(in: 0...255, using: &rng)
                }
                inputs.append(mutated)
            }
        }
        var accepted = 0
        for input in inputs {
            let ours = try? JSONParser.parse(input)
            let theirs = reference(input)
            if let ours, let theirs {
                accepted += 1
                #expect(ours.canonicalText == theirs.canonicalText, "\(String(decoding: input, as: UTF8.self))")
            } else if theirs != nil, case .failure(let failure) = Result(catching: { () throws(JSONParser.Failure) in try JSONParser.parse(input) }),
                failure.reason.contains("nested") || failure.reason.contains("trailing comma")
                    // JSONDecoder never reads the value of a repeated key, so it lets bad
                    // text there through; JSONSerialization, which reads every value, agrees with us.
                    || (try? JSONSerialization.jsonObject(with: Data(input), options: .fragmentsAllowed)) == nil
            {
                continue
            } else {
                let why = Result(catching: { () throws(JSONParser.Failure) in try JSONParser.parse(input) })
                #expect((ours == nil) == (theirs == nil), "disagree (\(why)) on \(String(decoding: input, as: UTF8.self))")
            }
        }
        #expect(accepted > 100)
    }
}
