/**
 * The simulator's error type: an EC2 error code, message and HTTP status, rendered by the
 * API layer as EC2's `<Response><Errors>…` document.
 *
 * @module
 */

/** An error EC2 would return; `status` is the HTTP status EC2 uses for `code`. */
export class SimError extends Error {
  /** The EC2 error code, e.g. `InvalidNetworkInterfaceID.NotFound`. */
  readonly code: string;
  /** The HTTP status (400 for client errors, 412 DryRunOperation, 500/503 server side). */
  readonly status: number;
  constructor(code: string, message: string, status = 400) {
    super(message);
    this.name = "SimError";
    this.code = code;
    this.status = status;
  }
}

/** `InvalidParameterValue` with a message. */
export function invalidValue(message: string): SimError {
  return new SimError("InvalidParameterValue", message);
}

/** `MissingParameter` naming the parameter. */
export function missingParameter(name: string): SimError {
  return new SimError(
    "MissingParameter",
    `The request must contain the parameter ${name}`,
  );
}

/** Throws `InvalidParameterValue` with a message. */
export function invalidValueThrow(message: string): never {
  throw invalidValue(message);
}

/** Throws `InvalidParameterValue` for a negative address count. */
export function invalidCount(): never {
  throw invalidValue("The count of addresses must be a positive integer");
}
