/** This SDK's version, sent in the User-Agent (`pandastack-typescript/<version>`). */
export const VERSION = "0.1.0";
