// Loaded before every test file (bunfig.toml): fixed time zone, and unhandled rejections fail loudly.
process.env.TZ = 'UTC'
process.on('unhandledRejection', error => {
  throw error
})
