/** Instrumentation scope of twophase's tracer and meter. Kept equal to package.json's version (a unit test checks). */
export const INSTRUMENTATION_NAME = 'twophase';
export const INSTRUMENTATION_VERSION = '0.1.0';
