declare module 'swagger-ui-dist/swagger-ui-bundle.js' {
  const path: string
  export default path
}
declare module '*.css' {
  const path: string
  export default path
}
declare module 'swagger-ui-dist/oauth2-redirect.js' {
  const text: string
  export default text
}
