import Experimently
import ExperimentlyMock
/// Placeholder; the harness arrives with issue 4.
public enum ContractHarnessInfo { public static let version = "0.1.0" }
